"""``spt.Throughput`` and ``spt.count_flops``: speed, FLOPs counted from the traced step,
MFU and memory in the log lines, the summaries and the sinks.

The tests taking ``style`` run in both TF styles with one body.
"""

import re

import numpy as np
import pytest

import tfsnippet as spt
from tests.helpers import read_scalars
from tests.scaffold.health_models import cnn_flops, cnn_train_step, mlp_flops, mlp_train_step


class Sink(spt.MetricSink):
    def __init__(self):
        self.epochs = []

    def write_stats(self, scope, step, epoch, stats):
        self.epochs.append({k: v['mean'] for k, v in stats.items()})


def metric_of(line, name):
    found = re.search(rf'\b{name}: ([0-9.e+-]+)', line)
    return None if found is None else float(found.group(1))


def batches_of(n, x_shape, n_out=10, seed=0):
    rng = np.random.RandomState(seed)
    return [(rng.randn(*x_shape).astype(np.float32),
             rng.randint(0, n_out, size=x_shape[0]).astype(np.int32)) for _ in range(n)]


@pytest.mark.parametrize('model', ['mlp', 'cnn'])
def test_throughput_lines_carry_the_flops_of_the_traced_step(style, tmp_path, fake_clock, model):
    if model == 'mlp':
        step, run = mlp_train_step(style)
        batches, analytic, batch = batches_of(5, [64, 64]), mlp_flops(), 64
    else:
        step, run = cnn_train_step(style)
        batches, analytic, batch = batches_of(5, [32, 16, 16, 3]), cnn_flops(), 32
    lines, sink = [], Sink()
    loop = spt.TrainLoop(max_epoch=2, clock=fake_clock, print_func=lines.append,
                         show_eta=False, summary_dir=str(tmp_path))
    loop.add_component(spt.MetricRecorder(sink))
    throughput = spt.Throughput(batch_size=batch, step=step, peak_flops=1e9)
    loop.add_component(throughput)
    with loop:
        for _ in loop.iter_epochs():
            for _, (x, y) in loop.iter_steps(batches):
                loop.collect_metrics(loss=run(x, y))
                fake_clock.advance(.5)
            loop.print_logs()
    flops = throughput.step_flops
    assert abs(flops - analytic) / analytic < .1
    epoch_lines = [line for line in lines if line.startswith('[Epoch')]
    assert len(epoch_lines) == 2
    for line in epoch_lines:   # 2 steps/s on the fake clock (the first step left out)
        assert metric_of(line, 'steps per sec') == 2
        assert metric_of(line, 'samples per sec') == 2 * batch
        assert metric_of(line, 'step flops') == pytest.approx(flops, rel=1e-4)
        assert metric_of(line, 'flops per sec') == pytest.approx(2 * flops, rel=1e-4)
        assert metric_of(line, 'mfu') == pytest.approx(2 * flops / 1e9, rel=1e-3)
        assert metric_of(line, 'peak rss mb') > 10
    assert [e['step_flops'] for e in sink.epochs] == [flops, flops]
    assert read_scalars(tmp_path, 'metrics/flops_per_sec') == [(5, 2 * flops), (10, 2 * flops)]


def test_a_batch_size_function_counts_the_samples_of_each_batch(fake_clock):
    batches = [np.zeros(n) for n in (3, 5, 7, 9)]
    loop = spt.TrainLoop(max_epoch=1, clock=fake_clock, print_func=lambda s: None)
    throughput = spt.Throughput(batch_size=len, flops=1000.)
    loop.add_component(throughput)
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(batches):
                fake_clock.advance(2.)
    # the first step (3 samples) is left out: 21 samples in 6 s
    assert throughput.last['samples_per_sec'] == 21 / 6
    assert throughput.last['flops_per_sec'] == 1000. / 2
    assert 'mfu' not in throughput.last   # no peak known for a CPU


def test_count_flops_of_a_tf_function_and_bad_targets():
    import tensorflow as tf

    @tf.function
    def matmul(a, b):
        return a @ b
    assert spt.count_flops(matmul, tf.zeros([8, 16]), tf.zeros([16, 4])) == 2 * 8 * 16 * 4
    with pytest.raises(TypeError, match='`target` must be a tf.function'):
        spt.count_flops(3)
    with pytest.raises(ValueError, match='`flops` replaces counting them from `step`'):
        spt.Throughput(step=matmul, flops=10.)
