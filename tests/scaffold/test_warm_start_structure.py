"""Warm start of a Keras model, layer or tf.Module from a Keras weights file or a
tf.train.Checkpoint, matched by the object structure; a reversed `mapping` is refused."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfsnippet.scaffold.checkpoint.export import export_weights
from tfsnippet.scaffold.checkpoint.warm_start import warm_start


def make_net(name='net', head=2, base=0., extra=False):
    layers = [keras.Input((3,)), keras.layers.Dense(4, name='hidden'),
              keras.layers.Dense(head, name='head')]
    if extra:
        layers.append(keras.layers.Dense(5, name='extra'))
    model = keras.Sequential(layers, name=name)
    for i, var in enumerate(model.variables):
        var.assign(np.full(var.shape, base + i, dtype='float32'))
    return model


def filled(model):
    return {v.path: np.unique(v.numpy()).tolist() for v in model.variables}


@pytest.fixture(params=['save_weights', 'export_best', 'tf.train.Checkpoint'])
def source(request, tmp_path):
    """A file of the pre-trained `make_net('pre', base=10.)`, in each kind a user has."""
    pre = make_net('pre', base=10.)
    if request.param == 'save_weights':
        path = str(tmp_path / 'pre.weights.h5')
        pre.save_weights(path)
    elif request.param == 'export_best':
        path = export_weights(str(tmp_path / 'best.weights.h5'), pre)
    else:
        path = tf.train.Checkpoint(model=pre).save(str(tmp_path / 'ckpt'))
    return path


def test_a_fresh_model_of_the_same_architecture_is_matched_by_structure(source):
    target = make_net('fresh')   # other layer names: names alone would match nothing
    lines = []
    report = warm_start(source, target, print_func=lines.append)
    assert filled(target) == {'fresh/hidden/kernel': [10.], 'fresh/hidden/bias': [11.],
                              'fresh/head/kernel': [12.], 'fresh/head/bias': [13.]}
    assert report.matched_by == 'structure'
    assert report.restored == [v.path for v in target.variables]
    assert '(matched by object structure)' in lines[0]
    if report.source_format == 'keras_h5':
        assert [e.source for e in report.entries] == [
            'layers/dense/vars/0', 'layers/dense/vars/1',
            'layers/dense_1/vars/0', 'layers/dense_1/vars/1']
    else:
        assert [e.source for e in report.entries] == [
            f'model/_functional/_operations/{i}/{n}' for i in (1, 2)
            for n in ('_kernel', 'bias')]


def test_structure_with_include_exclude_extra_layers_and_skip_mismatch(source):
    target = make_net('bigger', head=3, extra=True)   # head of another shape, one more layer
    with pytest.raises(ValueError, match=re.escape("'bigger/head/kernel' <- ")):
        warm_start(source, target, print_func=None)
    assert filled(target)['bigger/hidden/kernel'] == [0.]   # nothing assigned

    report = warm_start(source, target, skip_mismatch=True, print_func=None)
    assert report.restored == ['bigger/hidden/kernel', 'bigger/hidden/bias']
    assert report.mismatched == ['bigger/head/kernel', 'bigger/head/bias']
    assert report.missing == ['bigger/extra/kernel', 'bigger/extra/bias']
    assert filled(target)['bigger/hidden/bias'] == [11.]
    assert filled(target)['bigger/head/bias'] == [3.]

    other = make_net('other')
    report = warm_start(source, other, include='hidden', exclude='bias', print_func=None)
    assert report.restored == ['other/hidden/kernel']
    assert filled(other) == {'other/hidden/kernel': [10.], 'other/hidden/bias': [1.],
                             'other/head/kernel': [2.], 'other/head/bias': [3.]}


def test_a_mapping_rule_still_decides_for_the_targets_it_matches(tmp_path):
    path = str(tmp_path / 'pre.weights.h5')
    make_net('pre', base=10.).save_weights(path)
    target = make_net('t')
    report = warm_start(path, target, mapping={'^t/head/': None}, print_func=None)
    assert report.skipped == ['t/head/kernel', 't/head/bias']
    assert filled(target)['t/head/kernel'] == [2.] and filled(target)['t/hidden/kernel'] == [10.]


def test_a_tf_module_is_matched_in_an_object_based_checkpoint(style, tmp_path):
    def module(w, b, names):
        net = tf.Module()
        net.enc = tf.Module()
        net.enc.w = style.variable(np.full([2], w, 'float32'), names[0])
        net.b = style.variable(b, names[1])
        return net

    with style.new_run():       # written by an earlier program (its own graph in graph style)
        pre, other = module(5., 6., ('w', 'b')), style.variable(1., 'o')
        if style.is_graph:
            prefix = tf.compat.v1.train.Checkpoint(net=pre, other=other).save(
                str(tmp_path / 'c'), session=style.session)
        else:
            prefix = tf.train.Checkpoint(net=pre, other=other).save(str(tmp_path / 'c'))
    fresh = module(0., 0., ('x', 'y'))
    report = warm_start(prefix, fresh, print_func=None)
    assert report.matched_by == 'structure'
    assert [e.source for e in report.entries] == ['net/b', 'net/enc/w']
    assert (style.value(fresh.enc.w).tolist(), float(style.value(fresh.b))) == ([5., 5.], 6.)


def test_a_list_of_variables_is_still_matched_by_name(tmp_path):
    path = str(tmp_path / 'pre.weights.h5')
    make_net('pre', base=10.).save_weights(path)
    with pytest.raises(ValueError, match='Nothing to warm-start'):
        warm_start(path, list(make_net('t').variables), print_func=None)


def test_a_reversed_mapping_says_so(tmp_path):
    path = str(tmp_path / 'pre.weights.h5')
    make_net('pre', base=10.).save_weights(path)
    target = make_net('t')
    with pytest.raises(ValueError, match=re.escape(
            "`mapping` looks reversed: it goes from target names to source names (the "
            "opposite of tf.compat.v1.train.init_from_checkpoint's `assignment_map`), but "
            "none of its keys ^layers/dense/ matches a target name, while '^layers/dense/' "
            "matches the source name 'layers/dense/vars/0'.")):
        warm_start(path, target, mapping={'^layers/dense/': 't/hidden/'}, print_func=None)
    assert filled(target)['t/hidden/kernel'] == [0.]
