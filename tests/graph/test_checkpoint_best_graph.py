"""The export of the best weights with TF1-style graph code: a TF1 checkpoint.

The best checkpoint itself, in both styles, is tested in
tests/scaffold/test_checkpoint_best.py (the tests taking ``style``).

Each run builds its own graph and session, the way a new process would.
``w`` (3 values) gains 1 per step, two steps per epoch, so the weights of
the best epoch are known by hand: ``2 * epoch``; ``u`` is another global
variable that is checkpointed but not among `param_vars`, so not exported.
"""

import contextlib
import os

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt

v1 = tf.compat.v1
NAN = float('nan')
VALID = {1: 0.5, 2: 0.2, 3: 0.4, 4: 0.3, 5: NAN, 6: 0.7}


@contextlib.contextmanager
def new_graph():
    graph = tf.Graph()
    with graph.as_default(), v1.Session(graph=graph) as session:
        yield session


def run(root, valid, max_epoch, lines=None, **kwargs):
    """Train up to `max_epoch` in a new graph; return the final value of ``w``."""
    with new_graph() as session:
        w = v1.get_variable('w', shape=[3], initializer=v1.zeros_initializer())
        v1.get_variable('u', shape=[2], initializer=v1.ones_initializer())
        train_op = v1.assign_add(w, tf.ones([3]))
        session.run(v1.global_variables_initializer())
        kwargs.setdefault('checkpoint_keep_best', True)
        with spt.TrainLoop([w], max_epoch=max_epoch, checkpoint_dir=str(root),
                           print_func=(lines if lines is not None else []).append,
                           **kwargs) as loop:
            for epoch in loop.iter_epochs():
                for _ in loop.iter_steps(range(2)):
                    session.run(train_op)
                if epoch in valid:
                    loop.collect_metrics(valid_loss=valid[epoch])
        return session.run(w)


def read_back(directory):
    """``w`` restored from an exported directory by a TF1 Saver, in a new graph."""
    with new_graph() as session:
        w = v1.get_variable('w', shape=[3], initializer=v1.zeros_initializer())
        v1.train.Saver([w]).restore(session, tf.train.latest_checkpoint(directory))
        return session.run(w)


def test_export_best_is_a_tf1_checkpoint_of_the_best_weights(tmp_path):
    lines = []
    target = tmp_path / 'best'
    final = run(tmp_path / 'run', VALID, 6, lines=lines, checkpoint_max_to_keep=1,
                export_best=str(target))
    np.testing.assert_array_equal(final, [12., 12., 12.])     # the variables keep their values
    assert lines[-1] == f'Exported the best weights (valid_loss = 0.2, epoch 2, step 4) to {target}'
    np.testing.assert_array_equal(read_back(str(target)), [4., 4., 4.])
    assert sorted(name for name, _ in tf.train.list_variables(str(target))) == ['w']
    # spt.warm_start reads it too
    with new_graph() as session:
        w = v1.get_variable('w', shape=[3], initializer=v1.zeros_initializer())
        session.run(v1.global_variables_initializer())
        assert spt.warm_start(str(target), [w], print_func=None).restored == ['w']
        np.testing.assert_array_equal(session.run(w), [4., 4., 4.])
    # a second export replaces the first: only its files are left
    run(tmp_path / 'run', {7: 0.05}, 7, export_best=str(target))
    np.testing.assert_array_equal(read_back(str(target)), [14., 14., 14.])
    assert len([n for n in os.listdir(target) if n.endswith('.index')]) == 1
    assert not [n for n in os.listdir(target) if n.startswith('.tmp-')]


def test_export_best_inside_a_checkpoint_dir_the_loop_creates(tmp_path):
    target = tmp_path / 'run' / 'best'         # `run` does not exist yet
    run(tmp_path / 'run', VALID, 6, export_best=str(target))
    np.testing.assert_array_equal(read_back(str(target)), [4., 4., 4.])


def test_export_with_early_stopping_equals_the_restored_weights(tmp_path):
    final = run(tmp_path / 'run', VALID, 6, early_stopping=True, export_best=str(tmp_path / 'b'))
    np.testing.assert_array_equal(read_back(str(tmp_path / 'b')), final)
    np.testing.assert_array_equal(final, [4., 4., 4.])


def test_export_weights_of_the_current_values(session, tmp_path):
    w = v1.get_variable('w', initializer=[1., 2.])
    session.run(v1.global_variables_initializer())
    assert spt.export_weights(str(tmp_path / 'out'), [w]) == str(tmp_path / 'out')
    np.testing.assert_array_equal(
        tf.train.load_checkpoint(str(tmp_path / 'out')).get_tensor('w'), [1., 2.])


def test_export_path_errors(session, tmp_path):
    w = v1.get_variable('w', initializer=[1., 2.])
    session.run(v1.global_variables_initializer())
    (tmp_path / 'file').write_text('x')
    with pytest.raises(ValueError, match='^`path` must be a directory path in graph mode'):
        spt.export_weights(str(tmp_path / 'file'), [w])
    with pytest.raises(ValueError, match='^`path` .* is in a directory that does not exist'):
        spt.export_weights(str(tmp_path / 'no' / 'out'), [w])
    with pytest.raises(ValueError, match='^`export_best` .* is in a directory that does not '):
        spt.TrainLoop([w], checkpoint_dir=str(tmp_path / 'run'), checkpoint_keep_best=True,
                      export_best=str(tmp_path / 'no' / 'out'))
