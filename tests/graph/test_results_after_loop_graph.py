"""A failed resume of an experiment leaves the run as it was, with graph variables
(session.run); the results after the loop are tested in both styles in
tests/experiment/test_results_after_loop.py."""

import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.experiment.store import ResultsStore

v1 = tf.compat.v1

class Cfg(spt.Config):
    max_epoch = 4
    hidden = 2


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
