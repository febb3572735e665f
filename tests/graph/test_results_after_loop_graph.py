"""Graph twins: results collected after the TrainLoop's block are the best epoch's, and a
failed resume leaves the run as it was (session.run)."""

import json

import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.experiment.store import ResultsStore

v1 = tf.compat.v1

VALID = {1: 0.5, 2: 0.1, 3: 0.4, 4: 0.3}   # the best is epoch 2, where w == 2


class Cfg(spt.Config):
    max_epoch = 4
    hidden = 2


def test_results_collected_after_the_loop_are_the_best_weights_score(
        session, tmp_path, fake_clock):
    w = v1.get_variable('w', shape=[], initializer=v1.zeros_initializer())
    step = v1.assign_add(w, 1.)
    score = w * 10.
    session.run(v1.global_variables_initializer())
    lines = []
    with spt.Experiment(Cfg, root=tmp_path, name='best', args=[]) as exp:
        with spt.TrainLoop([w], max_epoch=exp.config.max_epoch, early_stopping=True,
                           clock=fake_clock, print_func=lines.append) as loop:
            for epoch in loop.iter_epochs():
                for _ in loop.iter_steps(range(2)):
                    loop.collect_metrics(loss=1.)
                session.run(step)
                loop.collect_metrics(valid_loss=VALID[epoch])
                loop.print_logs()
        loop.collect_results(test_score=session.run(score))
    assert lines[-1] == 'Results: test score: 20'
    assert json.loads((tmp_path / 'best' / 'result.json').read_text()) == {'test_score': 20.}
    with ResultsStore(tmp_path) as store:
        assert store.get_run('best').results == {'test_score': 20.}


def _files(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob('*'))
            if p.is_file()}


def test_a_failed_resume_leaves_the_run_as_it_was(session, tmp_path, fake_clock):
    def train(exp, name):
        with tf.compat.v1.variable_scope(name):
            w = v1.get_variable('w', shape=[exp.config.hidden],
                                initializer=v1.zeros_initializer())
        session.run(w.initializer)
        with spt.TrainLoop({'w': w}, max_epoch=1, clock=fake_clock,
                           print_func=lambda s: None) as loop:
            for _ in loop.iter_epochs():
                loop.collect_metrics(valid_loss=1.)

    with spt.Experiment(Cfg, root=tmp_path, name='g', args=[]) as exp:
        train(exp, 'a')
    with ResultsStore(tmp_path) as store:
        row = store.get_run('g')
    before = _files(tmp_path / 'g')
    with pytest.raises(ValueError) as info:
        with spt.Experiment(Cfg, root=tmp_path, name='g', args=['--hidden', '3']) as exp:
            train(exp, 'b')
    assert '(--hidden 2)' in ' '.join(info.value.__notes__)
    assert _files(tmp_path / 'g') == before
    with ResultsStore(tmp_path) as store:
        assert store.get_run('g') == row
