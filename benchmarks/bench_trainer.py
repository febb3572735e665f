"""Benchmark: Trainer steps per second against a hand-written loop and keras Model.fit.

The same MLP (64-128-10) on scikit-learn's digits, batch size 64:

* eager: a ``tf.function`` step driven by ``spt.Trainer`` (with a log line
  per epoch) against a bare ``for`` loop calling the same step (target:
  Trainer / hand-written steps per second >= 0.97), and ``keras.Model.fit``
  on the same model and data;
* graph (child process): ``spt.Trainer`` with a ``train_op`` against a bare
  loop of ``session.run`` on the same op, and against the fastest loop one
  writes by hand, a ``Session.make_callable`` of the op and loss built once
  and called with each batch.

Runs alternate in mirrored quads (hand, Trainer, Trainer, hand, then
Trainer, hand, hand, Trainer, ...), each run a whole TrainLoop of a few
epochs, and each quad gives one ratio of speeds (Trainer / hand-written)
from the mean of each contestant's two runs, so neither a drift of the load
nor running first or second in a pair favours one of them.  The table shows
the median ratio with its quartiles (their spread, IQR/median), the 95%
confidence interval of the median and the ratio of the best single runs; a
target counts as met only when the whole interval meets it ("unclear" when
it straddles the target).  The target is judged on wall time; the same runs'
CPU time of the main thread (which runs both loops' Python and calls the
step, while TensorFlow's threads do the same work in both) follows as a
steadier second figure.  For the eager style a last table splits a run's
time into the step function's calls, the gaps between steps, the epoch
ends and the run's start and end (``StepTimeline``): what the Trainer
spends outside the step, and whether its steps themselves got slower.  Usage: ``python benchmarks/bench_trainer.py [--quick] [--style all|eager|graph]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Any

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _bench import (Row, Samples, Stopwatch, StepTimeline, describe_machine,  # noqa: E402
                    format_table, paired_ratio, time_alternating, timeline_rounds,
                    whole_call, write_rows)
from _shared import run_child  # noqa: E402

BATCH = 64
TARGET = 0.97   # Trainer / hand-written loop, steps per second


def _data() -> tuple[Any, Any]:
    import numpy as np
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    return (x / 16.).astype(np.float32), y.astype(np.int64)


def _median_rate(samples: Samples, steps: int) -> float:
    """Steps per second of the median run."""
    return steps / samples.median


def _paired_runs(timed: dict[str, Samples]) -> dict[str, list[float]]:
    """The rounds' mean wall and main-thread CPU times of each contestant and their
    single runs' wall times, for the parent."""
    out = {}
    for name, samples in timed.items():
        out[name], out[f'{name}_cpu'], out[f'{name}_single'] = \
            samples.wall, samples.cpu, samples.single
    return out


def _where_time_goes(step: Any, steps_per_epoch: int, repeats: int,
                     loops: dict[str, Any]) -> dict[str, dict[str, float]]:
    """The parts of a run (see ``StepTimeline``) of each of `loops`, each called with
    the step function timestamped, in `repeats` quads: medians, seconds per run."""
    timelines = {name: StepTimeline(steps_per_epoch) for name in loops}

    def timed(name: str) -> Any:
        timeline, body = timelines[name], loops[name]
        wrapped = timeline.wrap(step)

        def run(watch: Stopwatch) -> None:
            with watch, timeline.run():
                body(wrapped)
        return run

    time_alternating({name: timed(name) for name in loops}, repeats, quads=True)
    return {name: t.medians() for name, t in timelines.items()}


def eager_mlp() -> tuple[list[tuple[Any, Any]], Any, Any, Any]:
    """The digits batches, the Keras MLP (seeded), its loss function and its
    ``tf.function`` training step (SGD), traced and built."""
    import keras
    import tensorflow as tf

    x, y = _data()
    batches = [(x[i:i + BATCH], y[i:i + BATCH]) for i in range(0, len(x), BATCH)]
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation='relu'),
                              keras.layers.Dense(10)])
    optimizer = keras.optimizers.SGD(0.01)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(bx: Any, by: Any) -> dict[str, Any]:
        with tf.GradientTape() as tape:
            loss = loss_fn(by, model(bx, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {'loss': loss}

    for bx, by in batches:  # warm-up: trace and build
        step(bx, by)
    return batches, model, loss_fn, step


def run_eager(epochs: int, repeats: int) -> dict[str, float]:
    import keras
    import numpy as np

    import tfsnippet as spt

    x, y = _data()
    batches, model, loss_fn, step = eager_mlp()
    steps = epochs * len(batches)

    def hand(step: Any = step) -> None:
        for _ in range(epochs):
            for bx, by in batches:
                step(bx, by)

    def hand_logged(step: Any = step) -> None:
        # what the Trainer's log line needs, written by hand: each step's loss
        # kept, their mean and the epoch's time printed at the end of the epoch
        lines = []
        for epoch in range(epochs):
            start, losses = time.perf_counter(), []
            for bx, by in batches:
                losses.append(step(bx, by)['loss'])
            lines.append(f'Epoch {epoch + 1}/{epochs}: {time.perf_counter() - start:.3g}s; '
                         f'loss {np.mean([float(v) for v in losses]):.6g}')

    def trainer(step: Any = step) -> None:
        with spt.TrainLoop(model.trainable_variables, max_epoch=epochs,
                           print_func=lambda s: None) as loop:
            t = spt.Trainer(loop, step, data_flow=batches)
            t.log_after_epochs(1)
            t.run()

    loops = {'hand': hand, 'trainer': trainer, 'hand_logged': hand_logged}
    for loop in loops.values():   # warm-up, outside the timed rounds
        loop()
    # the CPU time of this thread, which runs the Python of the loops and the
    # calls of the step (TensorFlow's own threads run the same work in each)
    timed = time_alternating({name: whole_call(loop) for name, loop in loops.items()},
                             repeats, quads=True, cpu_clock=time.thread_time)
    parts = _where_time_goes(step, len(batches), timeline_rounds(repeats), loops)

    model.compile(optimizer=keras.optimizers.SGD(0.01), loss=loss_fn)
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, shuffle=False)  # warm-up
    fit = time_alternating({'fit': whole_call(lambda: model.fit(
        x, y, batch_size=BATCH, epochs=epochs, verbose=0, shuffle=False))}, repeats)['fit']
    return {'steps': steps, **_paired_runs(timed), 'fit': _median_rate(fit, steps),
            'parts': parts}


def run_graph(epochs: int, repeats: int) -> dict[str, float]:
    import tensorflow as tf

    import tfsnippet as spt

    tf.compat.v1.disable_eager_execution()
    v1 = tf.compat.v1
    x, y = _data()
    batches = [(x[i:i + BATCH], y[i:i + BATCH]) for i in range(0, len(x), BATCH)]
    steps = epochs * len(batches)
    ph_x = v1.placeholder(tf.float32, [None, 64])
    ph_y = v1.placeholder(tf.int64, [None])
    w1 = v1.get_variable('w1', [64, 128])
    b1 = v1.get_variable('b1', [128], initializer=v1.zeros_initializer())
    w2 = v1.get_variable('w2', [128, 10])
    b2 = v1.get_variable('b2', [10], initializer=v1.zeros_initializer())
    logits = tf.matmul(tf.nn.relu(tf.matmul(ph_x, w1) + b1), w2) + b2
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=ph_y, logits=logits))
    train_op = v1.train.GradientDescentOptimizer(0.01).minimize(loss)
    with spt.utils.create_session().as_default() as sess:
        sess.run(v1.global_variables_initializer())

        def hand() -> None:
            for _ in range(epochs):
                for bx, by in batches:
                    sess.run([train_op, loss], feed_dict={ph_x: bx, ph_y: by})

        def hand_callable() -> None:
            call = sess.make_callable([train_op, loss], feed_list=[ph_x, ph_y])
            for _ in range(epochs):
                for bx, by in batches:
                    call(bx, by)

        def trainer() -> None:
            with spt.TrainLoop([w1, b1, w2, b2], max_epoch=epochs,
                               print_func=lambda s: None) as loop:
                t = spt.Trainer(loop, train_op, [ph_x, ph_y], batches, metrics={'loss': loss})
                t.log_after_epochs(1)
                t.run()

        def trainer_with_services(watch: Stopwatch) -> None:
            # checkpoints each epoch, summaries, a log line per epoch: what
            # MonitoredTrainingSession's stock hooks do below
            with tempfile.TemporaryDirectory() as work_dir, watch:
                with spt.TrainLoop([w1, b1, w2, b2], max_epoch=epochs, checkpoint_dir=work_dir,
                                   checkpoint_epoch_freq=1, checkpoint_max_to_keep=2,
                                   summary_dir=os.path.join(work_dir, 'tb'),
                                   restore_checkpoint=False, print_func=lambda s: None) as loop:
                    t = spt.Trainer(loop, train_op, [ph_x, ph_y], batches,
                                    metrics={'loss': loss})
                    t.log_after_epochs(1)
                    t.run()

        hand()  # warm-up
        hand_callable()
        trainer()
        timed = time_alternating({'hand': whole_call(hand), 'trainer': whole_call(trainer),
                                  'hand_callable': whole_call(hand_callable)},
                                 repeats, quads=True, cpu_clock=time.thread_time)
        services = time_alternating({'services': trainer_with_services}, repeats)['services']

    # the same step under tf.compat.v1.train.MonitoredTrainingSession with its
    # stock hooks: checkpoints and summaries each epoch, a loss log each epoch
    global_step = v1.train.get_or_create_global_step()
    with tf.control_dependencies([train_op]):
        mts_op = v1.assign_add(global_step, 1)
    v1.summary.scalar('loss', loss)

    def monitored(watch: Stopwatch) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            hooks = [v1.train.StopAtStepHook(num_steps=steps),
                     v1.train.LoggingTensorHook({'loss': loss}, every_n_iter=len(batches))]
            with watch, v1.train.MonitoredTrainingSession(
                    checkpoint_dir=tmp, hooks=hooks, save_checkpoint_steps=len(batches),
                    save_summaries_steps=len(batches), log_step_count_steps=len(batches)) as mts:
                i = 0
                while not mts.should_stop():
                    bx, by = batches[i % len(batches)]
                    mts.run([mts_op, loss], feed_dict={ph_x: bx, ph_y: by})
                    i += 1

    mts = time_alternating({'mts': monitored}, repeats)['mts']
    return {'steps': steps, **_paired_runs(timed),
            'services': _median_rate(services, steps), 'mts': _median_rate(mts, steps)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='1 epoch a run, 2 rounds')
    parser.add_argument('--style', choices=['all', 'eager', 'graph'], default='all')
    parser.add_argument('--json', action='store_true', help=argparse.SUPPRESS)
    parser.add_argument('--table-json', metavar='PATH', help='also write the rows as JSON')
    args = parser.parse_args()
    epochs, repeats = (1, 2) if args.quick else (20, 31)
    if args.json:
        run = run_eager if args.style == 'eager' else run_graph
        print(json.dumps(run(epochs, repeats)))
        return
    print('Trainer benchmark')
    print(describe_machine())
    print(f'  data        digits 1797x64, batch {BATCH}; {repeats} mirrored quads (a, b, b, a / '
          f'b, a, a, b) of runs, a run = a TrainLoop of {epochs} epochs')
    print()
    results, table, where = [], [], []
    for style in (['eager', 'graph'] if args.style == 'all' else [args.style]):
        argv = ['--json', '--style', style] + (['--quick'] if args.quick else [])
        r = json.loads(run_child(__file__, argv, graph=style == 'graph').strip().splitlines()[-1])
        hand = Samples(r['hand'], r['hand'], r['hand_single'])
        trainer = Samples(r['trainer'], r['trainer'], r['trainer_single'])
        paired = paired_ratio(hand, trainer, higher_is_better=True)
        decided = paired.decide(at_least=TARGET)
        hand_rate, ours = r['steps'] / hand.median, r['steps'] / trainer.median
        results.append(Row(f'Trainer vs hand-written loop [{style}]', 'hand-written loop',
                           hand_rate, hand_rate * paired.median, 'steps/s',
                           f'ratio >= {TARGET:g} (whole 95% CI)',
                           None if decided == 'unclear' else decided == 'yes'))
        table.append((f'Trainer vs hand-written loop [{style}]', f'{hand_rate:.1f}',
                      f'{ours:.1f}', paired.text(), paired.quartiles_text(),
                      f'{paired.spread:.1%}', f'>={TARGET:g}',
                      decided))
        cpu = paired_ratio(Samples(r['hand_cpu'], r['hand_cpu']),
                           Samples(r['trainer_cpu'], r['trainer_cpu']), higher_is_better=True,
                           cpu=True)
        table.append((f'  the same runs, main-thread CPU [{style}]', '', '', cpu.text(),
                      cpu.quartiles_text(), f'{cpu.spread:.1%}', f'>={TARGET:g}',
                      cpu.decide(at_least=TARGET)))
        baselines = [('hand_logged', f'Trainer vs hand-written loop logging each epoch [{style}]',
                      'hand-written loop, its loss kept and logged per epoch'),
                     ('hand_callable', f'Trainer vs hand-written make_callable loop [{style}]',
                      'hand-written loop of a Session.make_callable')]
        for key, case, label in baselines:   # the logging loop; the fastest graph loop
            if key not in r:
                continue
            base = Samples(r[key], r[f'{key}_cpu'], r[f'{key}_single'])
            vs_base = paired_ratio(base, trainer, higher_is_better=True)
            base_rate = r['steps'] / base.median
            results.append(Row(case, label, base_rate, base_rate * vs_base.median, 'steps/s'))
            table.append((case, f'{base_rate:.1f}', f'{ours:.1f}', vs_base.text(),
                          vs_base.quartiles_text(), f'{vs_base.spread:.1%}', '', ''))
        if 'parts' in r:
            where.append((style, r['steps'], r['parts']))
        others = [('fit', f'Trainer vs keras Model.fit [{style}]', 'keras Model.fit', ours),
                  ('mts', f'Trainer+ckpt+summaries vs MonitoredTrainingSession [{style}]',
                   'MonitoredTrainingSession + stock hooks', r.get('services'))]
        for key, case, baseline, value in others:
            if key in r:
                results.append(Row(case, baseline, r[key], value, 'steps/s'))
                table.append((case, f'{r[key]:.1f}', f'{value:.1f}',
                              f'{value / r[key]:.3f}', '', '', '', ''))
    print(format_table(('case', 'baseline steps/s', 'Trainer steps/s',
                        'ratio: median (95% CI) best', 'quartiles', 'IQR/median', 'target',
                        'met'), table, align='lrrrrrrr'))
    for style, steps, parts in where:
        print()
        print(f'Where the time of a run goes [{style}]: timestamps around each call of the step '
              f'function, medians of {timeline_rounds(repeats)} quads, µs per step; "+" columns: '
              f'the Trainer minus the loop, and that in % of the hand-written loop\'s total')
        total = sum(parts['hand'].values())
        lines = []
        for part in StepTimeline.PARTS + ('total',):
            hand, logged, ours = (sum(p.values()) if part == 'total' else p[part]
                                  for p in (parts['hand'], parts['hand_logged'],
                                            parts['trainer']))
            lines.append((part, *(f'{v * 1e6 / steps:.2f}' for v in (hand, logged, ours)),
                          f'{(ours - hand) * 1e6 / steps:+.2f}', f'{(ours - hand) / total:+.2%}',
                          f'{(ours - logged) * 1e6 / steps:+.2f}',
                          f'{(ours - logged) / total:+.2%}'))
        print(format_table(('part', 'hand-written', 'hand, logging', 'Trainer', '+ hand', '%',
                            '+ logging', '%'), lines, align='lrrrrrrr'))
    write_rows(args.table_json, results)


if __name__ == '__main__':
    main()
