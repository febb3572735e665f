"""`seed_everything`: two processes seeded alike train bitwise-equal weights, one of
them straight through two epochs, the other one epoch, then resumed for the second
(the model, its initial weights, the data and its shuffling all come from the
seed)."""

import os
import random

import numpy as np
import pytest

import tfsnippet as spt
from tests.helpers.forkserver import ForkServer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = r'''
import sys
import numpy as np
import keras
import tensorflow as tf
import tfsnippet as spt
from tests.helpers.forkserver import ForkServer

seed, epochs_per_run, root, output = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
tf.config.threading.set_inter_op_parallelism_threads(1)
tf.config.threading.set_intra_op_parallelism_threads(1)


def run(max_epoch):
    spt.seed_everything(seed, deterministic=True)
    x = np.random.normal(size=(96, 4)).astype(np.float32)
    y = (x @ np.random.normal(size=(4, 1))).astype(np.float32)
    flow = spt.DataFlow.arrays([x, y], 16, shuffle=True)   # seeded from numpy
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation='relu'),
                              keras.layers.Dense(1)])
    opt = keras.optimizers.Adam(0.01)
    opt.build(model.trainable_variables)

    @tf.function
    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(xb) - yb) ** 2)
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                model.trainable_variables))
        return loss

    with spt.TrainLoop(model.trainable_variables, max_epoch=max_epoch, checkpoint_dir=root,
                       checkpoint_save_objects={'model': model, 'opt': opt},
                       print_func=lambda s: None) as loop:
        for _ in loop.iter_epochs():
            for _, (xb, yb) in loop.iter_steps(flow):
                loop.collect_metrics(loss=train_step(xb, yb))
    return model, opt


for max_epoch in [int(e) for e in epochs_per_run.split(',')]:
    model, opt = run(max_epoch)
np.savez(output, *[v.numpy() for v in model.variables + opt.variables])
'''


ENV = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL='3', CUDA_VISIBLE_DEVICES='')


def test_seeded_processes_train_bitwise_equal_weights_across_a_resume(tmp_path):
    script = tmp_path / 'train.py'
    script.write_text(SCRIPT)
    # both runs are forked from one process that imported TensorFlow and Keras once
    server = ForkServer(('numpy', 'tensorflow', 'keras'), env=ENV)
    try:
        runs = []
        for name, epochs in (('straight', '2'), ('resumed', '1,2')):
            out = str(tmp_path / f'{name}.npz')
            runs.append((server.start([script, 7, epochs, tmp_path / name, out], cwd=ROOT,
                                      env=ENV), out))
        for proc, _ in runs:
            assert proc.wait() == 0
    finally:
        server.close()
    straight, resumed = [np.load(out) for _, out in runs]
    assert len(straight.files) == len(resumed.files) > 4
    for key in straight.files:
        assert straight[key].tobytes() == resumed[key].tobytes(), key


def test_the_generators_draw_alike_after_the_same_seed(monkeypatch):
    import tensorflow as tf
    monkeypatch.setenv('PYTHONHASHSEED', os.environ.get('PYTHONHASHSEED', '0'))  # restored
    draws = []
    for _ in range(2):
        assert spt.seed_everything(3) == 3
        draws.append((random.random(), np.random.rand(), float(tf.random.uniform([])),
                      next(iter(spt.DataFlow.arrays([np.arange(10)], 10, shuffle=True)))[0]
                      .tolist()))
    assert draws[0] == draws[1]


def test_bad_seeds_name_the_argument():
    with pytest.raises(TypeError, match='`seed`'):
        spt.seed_everything('1')
    with pytest.raises(ValueError, match='`worker_index`'):
        spt.seed_everything(1, worker_index=-1)
