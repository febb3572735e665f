"""Warm start by structure into a model with a layer inserted: the inserted layer does not
receive the values of the layer it displaced, even when their shapes fit; the layers are
matched by their names instead (a Keras weights file and a tf.train.Checkpoint record them),
and the inserted one is reported missing."""

import numpy as np
import pytest
import tensorflow as tf

from tfsnippet.scaffold.checkpoint.warm_start import warm_start

v1 = tf.compat.v1


# ------------------------------------------------------------ tf.Module, both styles
def module_net(style, layers, base):
    """A tf.Module with a list of layers ``(name, shape)``, each a module with one variable
    ``<name>/w`` holding ``base + its rank``."""
    net = tf.Module()
    net.layers = []
    for i, (name, shape) in enumerate(layers):
        layer = tf.Module()
        layer.w = tf.Variable(np.full(shape, base + i, 'float32'), name=f'{name}/w')
        net.layers.append(layer)
    if style.is_graph:
        style.session.run(v1.variables_initializer(net.variables))
    return net


def module_checkpoint(style, prefix):
    """The pre-trained net: hidden (3, 4) = 10, head (4, 4) = 11."""
    layers = [('hidden', [3, 4]), ('head', [4, 4])]
    if not style.is_graph:
        return tf.train.Checkpoint(net=module_net(style, layers, 10.)).save(prefix)
    with tf.Graph().as_default() as graph, v1.Session(graph=graph) as session:
        net = tf.Module()
        net.layers = []
        for i, (name, shape) in enumerate(layers):
            layer = tf.Module()
            layer.w = tf.Variable(np.full(shape, 10. + i, 'float32'), name=f'{name}/w')
            net.layers.append(layer)
        ckpt = v1.train.Checkpoint(net=net)
        session.run(v1.global_variables_initializer())
        return ckpt.save(prefix, session=session)


def test_an_inserted_module_layer_does_not_take_the_values_of_the_next(style, tmp_path):
    prefix = module_checkpoint(style, str(tmp_path / 'ckpt'))
    # `mid` inserted before `head`, of the shape of the old head
    target = module_net(style, [('hidden', [3, 4]), ('mid', [4, 4]), ('head', [4, 4])], 0.)
    lines = []
    report = warm_start(prefix, target, print_func=lines.append)
    values = [np.unique(style.value(layer.w)).tolist() for layer in target.layers]
    assert values == [[10.], [1.], [11.]]   # mid keeps its own, head has the old head's
    assert report.matched_by == 'layer'
    assert [(e.target, e.status, e.source) for e in report.entries] == [
        ('hidden/w', 'restored', 'net/layers/0/w'),
        ('mid/w', 'missing', None),
        ('head/w', 'restored', 'net/layers/1/w')]
    assert report.entries[1].detail == "no layer 'mid' in the source"
    assert lines[0].split('\n')[0].endswith(
        '(matched by layer name: the layers are not where the source has them)')


def test_an_appended_module_layer_is_still_matched_by_structure(style, tmp_path):
    prefix = module_checkpoint(style, str(tmp_path / 'ckpt'))
    target = module_net(style, [('hidden', [3, 4]), ('head', [4, 4]), ('extra', [4, 2])], 0.)
    report = warm_start(prefix, target, print_func=None)
    assert report.matched_by == 'structure'
    assert (report.restored, report.missing) == (['hidden/w', 'head/w'], ['extra/w'])


# ------------------------------------------------------------ Keras models, eager
def keras_net(name, layers, base):
    import keras
    model = keras.Sequential([keras.Input((3,))] + [keras.layers.Dense(units, name=layer)
                                                   for layer, units in layers], name=name)
    for i, var in enumerate(model.variables):
        var.assign(np.full(var.shape, base + i, 'float32'))
    return model


@pytest.fixture(params=['save_weights', 'tf.train.Checkpoint'])
def keras_source(request, tmp_path):
    """hidden: kernel 10, bias 11; head: kernel 12, bias 13 (4 units each)."""
    pre = keras_net('pre', [('hidden', 4), ('head', 4)], 10.)
    if request.param == 'save_weights':
        path = str(tmp_path / 'pre.weights.h5')
        pre.save_weights(path)
        return path
    return tf.train.Checkpoint(model=pre).save(str(tmp_path / 'ckpt'))


def filled(model):
    return {v.path: np.unique(v.numpy()).tolist() for v in model.variables}


def test_an_inserted_keras_layer_does_not_take_the_output_layer_weights(keras_source):
    target = keras_net('fresh', [('hidden', 4), ('mid', 4), ('head', 4)], 0.)
    report = warm_start(keras_source, target, print_func=None)
    assert filled(target) == {'fresh/hidden/kernel': [10.], 'fresh/hidden/bias': [11.],
                              'fresh/mid/kernel': [2.], 'fresh/mid/bias': [3.],
                              'fresh/head/kernel': [12.], 'fresh/head/bias': [13.]}
    assert report.matched_by == 'layer'
    assert report.missing == ['fresh/mid/kernel', 'fresh/mid/bias']


def test_auto_named_layers_that_share_a_name_by_chance_keep_the_structure(keras_source):
    # the same architecture, its layers named as another run's auto-names would be: one
    # name ('head') is the source's, elsewhere; by name less would be restored
    target = keras_net('fresh', [('head', 4), ('other', 4)], 0.)
    report = warm_start(keras_source, target, skip_mismatch=True, print_func=None)
    assert report.matched_by == 'structure'
    assert filled(target) == {'fresh/head/kernel': [10.], 'fresh/head/bias': [11.],
                              'fresh/other/kernel': [12.], 'fresh/other/bias': [13.]}
