"""``TrainLoop(warm_start=PATH)`` without `targets` warm-starts the loop's model: the one
Keras model or tf.Module among ``checkpoint_save_objects``, found in a Keras weights file or a
tf.train.Checkpoint by structure; with no such model, or several, the loop's variables are
matched by name, and when nothing matches the error says which `targets` to pass."""

import os
import re

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt

v1 = tf.compat.v1


def make_module(w, b, names=('w', 'b')):
    module = tf.Module()
    module.enc = tf.Module()
    module.enc.w = tf.Variable(np.full([2], w, 'float32'), name=names[0])
    module.b = tf.Variable(np.float32(b), name=names[1])
    return module


def pretrained_checkpoint(style, prefix):
    """A tf.train.Checkpoint of ``net`` = a module of w = [5, 5], b = 6, written as the
    style writes one (graph style: in a graph and session of its own)."""
    if not style.is_graph:
        return tf.train.Checkpoint(net=make_module(5., 6.)).save(prefix)
    with tf.Graph().as_default() as graph, v1.Session(graph=graph) as session:
        ckpt = v1.train.Checkpoint(net=make_module(5., 6.))
        session.run(v1.global_variables_initializer())
        return ckpt.save(prefix, session=session)


def fresh_module(style, names=('x', 'y')):
    module = make_module(0., 0., names=names)   # other names: names alone match nothing
    if style.is_graph:
        style.session.run(v1.variables_initializer(module.variables))
    return module


def test_the_model_among_the_loop_objects_is_warm_started(style, tmp_path):
    prefix = pretrained_checkpoint(style, str(tmp_path / 'pre' / 'ckpt'))
    fresh = fresh_module(style)
    lines = []
    loop = spt.TrainLoop(list(fresh.trainable_variables), max_epoch=1,
                         checkpoint_dir=str(tmp_path / 'run'),
                         checkpoint_save_objects={'net': fresh}, warm_start=prefix,
                         print_func=lines.append)
    with loop:
        assert style.value(fresh.enc.w).tolist() == [5., 5.]
        assert style.value(fresh.b) == 6.
    report = loop.components_of(spt.WarmStart)[0].report
    assert report.matched_by == 'structure'
    assert [e.source for e in report.entries] == ['net/b', 'net/enc/w']
    assert lines[0].startswith('Warm start from tf.train.Checkpoint') and \
        lines[0].split('\n')[0].endswith('(matched by object structure)')


def test_several_models_say_which_targets_to_pass(style, tmp_path):
    prefix = pretrained_checkpoint(style, str(tmp_path / 'pre' / 'ckpt'))
    first, second = fresh_module(style), fresh_module(style, names=('u', 'v'))
    loop = spt.TrainLoop(list(first.trainable_variables), max_epoch=1,
                         checkpoint_dir=str(tmp_path / 'run'),
                         checkpoint_save_objects={'first': first, 'second': second},
                         warm_start=prefix, print_func=lambda line: None)
    what = "the graph's global variables" if style.is_graph else '`param_vars`'
    with pytest.raises(ValueError, match=re.escape(
            f"Pass a `mapping` {{regex: replacement}} from target names to source names. The "
            f"targets were the loop's {what}, since `checkpoint_save_objects` holds several "
            f"models ('first', 'second'): pass `warm_start={{'source': {prefix!r}, 'targets': "
            f"model}}` with the one the source was saved from.")):
        with loop:
            pass
    assert style.value(first.b) == 0.
    # doing as it says works
    loop = spt.TrainLoop(list(first.trainable_variables), max_epoch=1,
                         checkpoint_dir=str(tmp_path / 'run2'),
                         checkpoint_save_objects={'first': first, 'second': second},
                         warm_start={'source': prefix, 'targets': first}, print_func=lambda line: None)
    with loop:
        assert style.value(first.b) == 6.


def test_a_keras_weights_file_warm_starts_the_keras_model_among_the_objects(tmp_path):
    import keras

    def net(name):
        return keras.Sequential([keras.Input((3,)), keras.layers.Dense(4),
                                 keras.layers.Dense(2)], name=name)

    pre = net('pre')
    for var in pre.variables:
        var.assign(tf.fill(var.shape, 3.))
    path = str(tmp_path / 'x.weights.h5')
    pre.save_weights(path)
    model = net('fresh')
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    loop = spt.TrainLoop(model.trainable_variables, max_epoch=1,
                         checkpoint_dir=str(tmp_path / 'run'),
                         checkpoint_save_objects={'model': model, 'optimizer': optimizer},
                         warm_start=path, print_func=lambda line: None)
    with loop:
        for var in model.variables:
            np.testing.assert_array_equal(var.numpy(), np.full(var.shape, 3.))


def test_without_a_model_the_error_says_to_pass_it(tmp_path):
    import keras
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    path = str(tmp_path / 'x.weights.h5')
    model.save_weights(path)
    loop = spt.TrainLoop(model.trainable_variables, max_epoch=1,
                         checkpoint_dir=str(tmp_path / 'run'), warm_start=path, print_func=lambda line: None)
    with pytest.raises(ValueError, match=re.escape(
            f"The targets were the loop's `param_vars`, since `checkpoint_save_objects` holds "
            f"no Keras model or tf.Module: pass `warm_start={{'source': {path!r}, 'targets': "
            f"model}}` with the model the source was saved from (its layers are found by "
            f"structure), or put it in `checkpoint_save_objects`.")):
        with loop:
            pass
    assert os.path.isfile(path)
