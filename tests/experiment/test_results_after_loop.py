"""Test scores collected after the TrainLoop's block are the best epoch's, and recorded."""

from __future__ import annotations

import json

import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.experiment.store import ResultsStore


class Cfg(spt.Config):
    max_epoch = 4


# validation losses of epochs 1..4: the best is epoch 2, where w == 2
VALID = {1: 0.5, 2: 0.1, 3: 0.4, 4: 0.3}


def test_results_collected_after_the_loop_are_the_best_weights_score(style, tmp_path,
                                                                      fake_clock):
    """In both TF styles: ``w`` gains 1 per epoch."""
    lines = []
    with spt.Experiment(Cfg, root=tmp_path, name='best', args=[]) as exp:
        w = style.variable(0., 'w')
        step = style.updater(w, 1.)
        with spt.TrainLoop([w], max_epoch=exp.config.max_epoch, early_stopping=True,
                           clock=fake_clock, print_func=lines.append) as loop:
            for epoch in loop.iter_epochs():
                for _ in loop.iter_steps(range(2)):
                    loop.collect_metrics(loss=1.)
                step()
                loop.collect_metrics(valid_loss=VALID[epoch])
                loop.print_logs()
        loop.collect_results(test_score=10. * float(style.value(w)))   # the best weights' score
    assert lines[-1] == 'Results: test score: 20'
    assert loop.results == {'test_score': 20.}
    result = json.loads((tmp_path / 'best' / 'result.json').read_text())
    assert result == {'test_score': 20.}
    with ResultsStore(tmp_path) as store:
        assert store.get_run('best').results == {'test_score': 20.}


def test_results_after_the_experiment_block_are_refused(tmp_path, fake_clock):
    with spt.Experiment(Cfg, root=tmp_path, name='late', args=[]):
        with spt.TrainLoop([tf.Variable(0.)], max_epoch=1, clock=fake_clock,
                           print_func=lambda s: None) as loop:
            pass
    with pytest.raises(RuntimeError, match=r"records into the Experiment only while its "
                                           r"`with` block is open"):
        loop.collect_results(test_score=1.)
    assert loop.results == {}
    assert not (tmp_path / 'late' / 'result.json').exists()


def test_results_after_a_loop_without_experiment_are_kept_and_printed(fake_clock):
    lines = []
    with spt.TrainLoop([tf.Variable(0.)], max_epoch=1, clock=fake_clock,
                       print_func=lines.append) as loop:
        pass
    loop.collect_results(test_acc=0.5)
    assert loop.results == {'test_acc': 0.5} and lines[-1] == 'Results: test acc: 0.5'
