"""The export of weights with TF1-style graph code: a TF1 checkpoint directory,
and the errors of a path that is not one.  The export of the best weights runs
in both styles in tests/scaffold/test_checkpoint_best.py."""

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt

v1 = tf.compat.v1


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
