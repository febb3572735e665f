"""Graph twin: a TF1-style loop under several workers without a strategy warns at entry."""

from __future__ import annotations

import json
import re
import warnings

import pytest
import tensorflow as tf

import tfsnippet as spt

v1 = tf.compat.v1


def run_loop(session, variables, **kwargs):
    lines = []
    step = v1.assign_add(variables[0], 1.)
    session.run(v1.global_variables_initializer())
    with spt.TrainLoop(variables, max_epoch=1, show_eta=False, print_func=lines.append,
                       **kwargs) as loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                session.run(step)
    return lines


def test_no_strategy_under_two_workers_warns_once(session, monkeypatch):
    cluster = {'worker': ['127.0.0.1:7101', '127.0.0.1:7102', '127.0.0.1:7103']}
    monkeypatch.setenv('TF_CONFIG', json.dumps({'cluster': cluster,
                                                'task': {'type': 'worker', 'index': 2}}))
    w = v1.get_variable('w', [], initializer=v1.zeros_initializer())
    with pytest.warns(RuntimeWarning, match=re.escape(
            'This process is worker 2 of 3 workers (from tf_config) but the TrainLoop has no '
            'strategy: every worker trains the whole model alone, on all the data, and writes '
            'into the same folders')):
        run_loop(session, [w])
    assert session.run(w) == 2.
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        run_loop(session, [w])


def test_mirrored_variables_without_strategy_warn(session, monkeypatch):
    monkeypatch.delenv('TF_CONFIG', raising=False)
    strategy = tf.distribute.MirroredStrategy(['/cpu:0'])
    with strategy.scope():
        w = v1.get_variable('mirrored_w', [], initializer=v1.zeros_initializer())
    with pytest.warns(RuntimeWarning, match=re.escape(
            "`param_vars` holds variables created in the scope of a MirroredStrategy (1 of 1: "
            "'mirrored_w'), but the TrainLoop has no strategy")):
        with spt.TrainLoop([w], max_epoch=1, show_eta=False, print_func=lambda s: None) as loop:
            for _ in loop.iter_epochs():
                pass
