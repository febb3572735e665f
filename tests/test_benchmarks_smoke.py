"""Smoke tests of the benchmark scripts, and tests of their shared helper ``_bench``.

The scripts are only checked to run and print their tables; their timings
are never asserted (they depend on the machine and on whatever else is
running on it).  All of them run once, in their ``--quick`` mode, in ONE
child process: ``run_all.py --quick`` (module fixture ``quick``), which
runs each script's ``main()`` in that process and their graph-mode parts in
one shared graph-mode child, so TensorFlow is imported a few times, not
twice per script; each test reads its script's output.  The helper's timer
is tested with a CPU clock that ticks once per reading, never against real
time.
"""

import importlib.util
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / 'benchmarks' / 'bench_train_loop.py'


class QuickRun:
    """What ``run_all.py --quick --output-dir DIR`` left: each script's output and rows."""

    def __init__(self, proc, out_dir):
        self.proc, self.dir = proc, out_dir

    def out(self, script):
        """The script's stdout, after checking that it ran and exited 0."""
        rc = (self.dir / f'{script}.rc').read_text()
        err = (self.dir / f'{script}.err').read_text(encoding='utf-8')
        out = (self.dir / f'{script}.out').read_text(encoding='utf-8')
        assert rc == '0', f'{script} exited {rc}:\nstdout:\n{out[-3000:]}\nstderr:\n{err[-4000:]}'
        return out

    def rows(self, script):
        return json.loads((self.dir / f'{script}.json').read_text(encoding='utf-8'))

    def left_over(self, script):
        """What the script left in its temporary folder (but the sources that TF's
        autograph writes there for each ``tf.function`` and keeps)."""
        return [name for name in os.listdir(self.dir / f'{script}.tmp')
                if not name.startswith('__autograph_generated_file')]


@pytest.fixture(scope='module')
def quick(tmp_path_factory):
    """Every benchmark's quick mode, run once by ``run_all.py --quick`` in one child."""
    out_dir = tmp_path_factory.mktemp('quick-run')
    root = str(SCRIPT.parents[1])
    env = dict(os.environ, PYTHONIOENCODING='utf-8', CUDA_VISIBLE_DEVICES='')
    env.pop('TF_CONFIG', None)
    env['PYTHONPATH'] = os.pathsep.join([root, env.get('PYTHONPATH', '')])
    proc = subprocess.run(
        [sys.executable, str(SCRIPT.parent / 'run_all.py'), '--quick', '--output-dir',
         str(out_dir)], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        encoding='utf-8', timeout=1200)
    return QuickRun(proc, out_dir)

EXPECTED_ROWS = (
    'no-op step, float loss [eager]',
    'no-op step, eager tensor loss [eager]',
    'MLP 64-128-10 on digits, tf.function [eager]',
    'no-op step, float loss [graph]',
    'no-op step, numpy float32 loss [graph]',
    'MLP 64-128-10 on digits, session.run [graph]',
)


def test_bench_train_loop_quick_run_prints_the_table(quick):
    out = quick.out('bench_train_loop.py')
    assert 'TensorFlow' in out and 'CPU' in out
    summary = out[out.index('Summary'):]
    lines = summary.splitlines()
    header = lines[1]
    for column in ('case', 'bare µs/step', 'TrainLoop µs/step', 'difference µs/step',
                   'ratio', 'target', 'met'):
        assert column in header, header
    rows = {line.split('  ')[0].strip(): line for line in lines[3:]}
    for case in EXPECTED_ROWS:
        assert case in rows, f'no row for {case!r} in:\n{summary}'
        assert rows[case].rstrip().endswith(('yes', 'no')), rows[case]


TRAINER_SCRIPT = SCRIPT.parent / 'bench_trainer.py'


def test_bench_trainer_quick_run_prints_the_ratios_of_both_styles(quick):
    out = quick.out(TRAINER_SCRIPT.name)
    assert '2 mirrored quads (a, b, b, a / b, a, a, b)' in out
    lines = out[out.index('case'):].splitlines()
    for column in ('ratio: median (95% CI) best', 'quartiles', 'IQR/median', 'target', 'met'):
        assert column in lines[0], lines[0]
    rows = {line.split('  ')[0]: line for line in lines[2:]}
    for style in ('eager', 'graph'):
        row = rows[f'Trainer vs hand-written loop [{style}]']
        assert re.search(r'\d\.\d{3} \(\d\.\d{3}-\d\.\d{3}\) best \d\.\d{3}  +'
                         r'\d\.\d{3}-\d\.\d{3}  +\d+\.\d%  +>=0\.97  +(yes|no|unclear)$',
                         row), row
    for style in ('eager', 'graph'):   # the same runs' main-thread CPU, decided alike
        row = next(line for line in lines if f'main-thread CPU [{style}]' in line)
        assert re.search(r'\d\.\d{3} \(\d\.\d{3}-\d\.\d{3}\) best \d\.\d{3} .*'
                         r'>=0\.97  +(yes|no|unclear)$', row), row
    row = next(line for line in lines if 'logging each epoch [eager]' in line)
    assert re.search(r'\d\.\d{3} \(\d\.\d{3}-\d\.\d{3}\) best \d\.\d{3}', row), row
    row = next(line for line in lines if 'make_callable loop [graph]' in line)  # the fastest
    assert re.search(r'\d\.\d{3} \(\d\.\d{3}-\d\.\d{3}\) best \d\.\d{3}', row), row
    # where an eager run's time goes: four parts that add up to the total, per contestant
    where = out[out.index('Where the time of a run goes [eager]'):].splitlines()
    assert re.split(r'\s{2,}', where[1].strip()) == [
        'part', 'hand-written', 'hand, logging', 'Trainer', '+ hand', '%', '+ logging', '%']
    cells = {c[0]: c[1:] for c in (re.split(r'\s{2,}', line.strip()) for line in where[3:8])}
    assert list(cells) == ['step', 'between steps', 'epoch ends', 'before and after', 'total']
    for column in range(3):   # hand-written, hand logging, Trainer
        assert sum(float(cells[p][column]) for p in list(cells)[:4]) == \
            pytest.approx(float(cells['total'][column]), abs=0.05)
    assert float(cells['total'][3]) == pytest.approx(
        float(cells['total'][2]) - float(cells['total'][0]), abs=0.02)
    written = quick.rows(TRAINER_SCRIPT.name)
    assert [r['case'] for r in written][:3] == [
        'Trainer vs hand-written loop [eager]',
        'Trainer vs hand-written loop logging each epoch [eager]',
        'Trainer vs keras Model.fit [eager]']


DATAFLOW_SCRIPT = SCRIPT.parent / 'bench_dataflow.py'

DATAFLOW_ROWS = (
    ('(a) numpy loop, x[idx], y[idx]', False),
    ('(b) DataFlow.arrays', True),
    ('(c) mapper alone', False),
    ('(c) map(mapper), inline + step', False),
    ('(c) map(mapper).threaded + step', False),
    ('(c) mapper cost hidden by thread', True),
    ('(d) tf.data slices.shuffle.batch', False),
)


def test_bench_dataflow_quick_run_prints_the_table(quick):
    out = quick.out(DATAFLOW_SCRIPT.name)
    assert 'TensorFlow' in out and 'CPU' in out
    summary = out[out.index('Summary'):]
    lines = summary.splitlines()
    header = lines[1]
    for column in ('case', 'batch size', 'batches/s', 'µs/batch', 'ratio', 'target', 'met'):
        assert column in header, header
    rows = {}
    for line in lines[3:]:
        cells = [c for c in line.split('  ') if c.strip()]
        if len(cells) >= 4 and cells[1].strip().isdigit():
            rows[(cells[0].strip(), int(cells[1]))] = line
    for batch_size in (64, 256):
        for case, judged in DATAFLOW_ROWS:
            assert (case, batch_size) in rows, \
                f'no row for {case!r} at batch size {batch_size} in:\n{summary}'
            if judged:
                assert rows[case, batch_size].rstrip().endswith(('yes', 'no')), \
                    rows[case, batch_size]


MLFLOW_SCRIPT = SCRIPT.parent / 'bench_mlflow.py'
MLFLOW_ROWS = ('MLflow log_metric per step', 'MLflow log_metric per step, async',
               'results store, per epoch', 'MlflowMirror, per epoch')


def test_bench_mlflow_quick_run_prints_the_table(quick):
    pytest.importorskip('mlflow', reason='the MLflow benchmark needs MLflow')
    out = quick.out(MLFLOW_SCRIPT.name)
    summary = out[out.index('Summary'):]
    lines = summary.splitlines()
    for column in ('case', 'µs/step', 'cpu µs/step', 'ratio to per-step MLflow'):
        assert column in lines[1], lines[1]
    cases = [line.split('  ')[0].strip() for line in lines[3:3 + len(MLFLOW_ROWS)]]
    assert cases == list(MLFLOW_ROWS), summary
    assert '1 epoch(s) of 10 steps per contestant' in out     # the quick size
    rows = quick.rows(MLFLOW_SCRIPT.name)
    assert [r['case'] for r in rows] == [f'record an epoch of 10 steps: {name}'
                                         for name in MLFLOW_ROWS[1:]]
    assert all(r['unit'] == 'µs/step' and r['value'] > 0 for r in rows), rows


DISTRIBUTED_SCRIPT = SCRIPT.parent / 'bench_distributed.py'


@pytest.mark.distributed
def test_bench_distributed_quick_run_prints_the_tables(quick):
    out = quick.out(DISTRIBUTED_SCRIPT.name)
    assert 'TensorFlow' in out and 'CPU' in out
    summary = out[out.index('Summary'):]
    for case in ('Mirrored, 2 logical CPUs', 'MultiWorkerMirrored, 2 workers [worker 0]',
                 'MultiWorkerMirrored, 2 workers [worker 1]'):
        line = next((x for x in summary.splitlines() if x.startswith(case)), None)
        assert line is not None, f'no row for {case!r} in:\n{summary}'
        # decided on the confidence interval of the median: 'unclear' when it straddles
        assert line.rstrip().endswith(('yes', 'no', 'unclear')), line
    where = out[out.index('Where the time of a Mirrored run goes'):].splitlines()
    assert [line.split('  ')[0] for line in where[3:8]] == [
        'step', 'between steps', 'epoch ends', 'before and after', 'total']
    rows = {r['case']: r for r in quick.rows(DISTRIBUTED_SCRIPT.name)}
    assert sorted(rows) == sorted([
        'Mirrored, 2 logical CPUs', 'MultiWorkerMirrored, 2 workers [worker 0]',
        'Mirrored, no-op step: data + metrics per step',
        'Mirrored, no-op step: data only (no metric)',
        'launcher start-up, 2 trivial workers', 'launch until MWMS strategy ready',
        'digits MLP, bare loop, 2 workers vs 1'])
    for row in rows.values():
        assert row['value'] > 0 and row['baseline_value'] > 0, row


@pytest.mark.parametrize('script', ['bench_components.py', 'bench_tfdata_checkpoint.py',
                                    'bench_object_store.py', 'bench_search.py',
                                    'bench_health_checks.py'])
def test_newer_benchmarks_quick_run_hand_their_rows_over(script, quick):
    """Each runs with --quick and writes the rows that run_all.py reads."""
    quick.out(script)
    rows = quick.rows(script)
    assert rows and all(r['value'] >= 0 and r['case'] for r in rows), rows


# ------------------------------------------------- the shared helper, _bench.py
@pytest.fixture(scope='module')
def bench():
    """``benchmarks/_bench.py``, imported as the scripts import it."""
    spec = importlib.util.spec_from_file_location('_bench', SCRIPT.parent / '_bench.py')
    module = importlib.util.module_from_spec(spec)
    sys.modules['_bench'] = module   # dataclasses look their module up here
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules['_bench']


def counting_clock():
    """A CPU clock that advances by exactly 1 at each reading."""
    return itertools.count().__next__


def recording(calls):
    """A contestant factory: each run appends its name to `calls`, inside the stopwatch."""
    def contestant(name):
        def run(watch):
            with watch:
                calls.append(name)
        return run
    return contestant


def test_time_alternating_runs_the_contestants_in_turn(bench):
    calls = []
    contestant = recording(calls)
    samples = bench.time_alternating({'base': contestant('base'), 'cand': contestant('cand')},
                                     repeats=3, cpu_clock=counting_clock())

    assert calls == ['base', 'cand'] * 3
    assert sorted(samples) == ['base', 'cand']
    for s in samples.values():
        assert len(s.wall) == 3 and all(w >= 0 for w in s.wall)
        assert s.cpu == [1, 1, 1]   # one tick between entering and leaving the stopwatch


def test_mirrored_rounds_reverse_every_other_round(bench):
    calls = []
    contestant = recording(calls)

    samples = bench.time_alternating({'a': contestant('a'), 'b': contestant('b')}, repeats=3,
                                     mirror=True)
    assert calls == ['a', 'b', 'b', 'a', 'a', 'b']
    assert len(samples['a'].wall) == len(samples['b'].wall) == 3


def test_quads_mirror_each_round_and_alternate_the_outside_contestant(bench):
    calls = []
    contestant = recording(calls)
    samples = bench.time_alternating({'a': contestant('a'), 'b': contestant('b')}, repeats=3,
                                     quads=True, cpu_clock=counting_clock())
    assert calls == ['a', 'b', 'b', 'a', 'b', 'a', 'a', 'b', 'a', 'b', 'b', 'a']
    for s in samples.values():
        assert len(s.wall) == 3 and len(s.single) == 6   # one mean per quad, every run kept
        assert s.cpu == [1, 1, 1]                        # the mean of two runs of one tick
        assert s.best == min(s.single) and s.median == pytest.approx(
            sorted(s.wall)[1])


def test_a_quad_sample_is_the_mean_of_its_two_runs_and_best_the_best_run(bench):
    """A contestant timed 1 s on the outside and 3 s on the inside of each quad."""
    ticks = iter([0, 1, 0, 3, 0, 3, 0, 1] * 2)   # a, b, b, a / b, a, a, b: enter, exit

    def clock():
        return next(ticks)

    def run(watch):
        with watch:
            pass

    samples = bench.time_alternating({'a': run, 'b': run}, repeats=2, quads=True,
                                     cpu_clock=clock)
    # a: 1 then 1 (outside), then 3 and 3 (inside); b the other way round
    assert samples['a'].cpu == [1., 3.] and samples['b'].cpu == [3., 1.]
    assert bench.Samples([2., 2.], [0., 0.], [1., 3., 2.]).best == 1.
    assert bench.Samples([2., 4.], [0., 0.]).best == 2.   # no single runs: the samples
    assert bench.Samples([2.], [1.], [1.5]).scaled(2).single == [3.]


def test_quads_and_mirror_exclude_each_other(bench):
    with pytest.raises(ValueError, match='`mirror` and `quads` cannot both be set'):
        bench.time_alternating({'a': None}, 1, mirror=True, quads=True)


def test_paired_ratio_is_the_median_of_per_round_ratios(bench):
    base = bench.Samples(wall=[1., 2., 4., 1., 2.], cpu=[0.] * 5)
    cand = bench.Samples(wall=[1.1, 2.2, 4.4, 0.9, 2.4], cpu=[0.] * 5)
    times = bench.paired_ratio(base, cand)
    assert times.ratios == pytest.approx((1.1, 1.1, 1.1, 0.9, 1.2))
    assert times.median == pytest.approx(1.1)
    assert times.quartiles == pytest.approx((1.1, 1.1))
    assert times.best == pytest.approx(0.9)          # 0.9 / 1.0, the best runs
    assert times.decide(at_most=1.15) == 'yes' and times.decide(at_most=1.05) == 'no'
    speeds = bench.paired_ratio(base, cand, higher_is_better=True)
    assert speeds.median == pytest.approx(1 / 1.1)
    assert speeds.text().startswith('0.909 (0.909-0.909) best 1.111')


def test_paired_ratio_of_cpu_times_uses_the_cpu_samples(bench):
    base = bench.Samples(wall=[9.] * 3, cpu=[1., 2., 4.])
    cand = bench.Samples(wall=[1.] * 3, cpu=[1.2, 2.2, 4.4])
    paired = bench.paired_ratio(base, cand, cpu=True)
    assert paired.ratios == pytest.approx((1.2, 1.1, 1.1))
    assert paired.best == pytest.approx(1.2)        # 1.2 / 1.0, the least CPU of each
    speeds = bench.paired_ratio(base, cand, higher_is_better=True, cpu=True)
    assert speeds.median == pytest.approx(1 / 1.1)
    with pytest.raises(ValueError, match='same rounds, got 3 and 2 runs'):
        bench.paired_ratio(base, bench.Samples(wall=[1.] * 3, cpu=[1.] * 2), cpu=True)


def test_step_timeline_splits_a_run_into_parts_that_add_up(bench):
    # a clock read at: run start 0; steps [1, 3], [4, 6] (epoch 1); [10, 12], [12.5, 14]
    # (epoch 2); run end 20
    readings = iter([0., 1., 3., 4., 6., 10., 12., 12.5, 14., 20.])
    timeline = bench.StepTimeline(2, clock=lambda: next(readings))
    calls = []
    step = timeline.wrap(lambda x, scale=1: calls.append(x * scale) or x)
    with timeline.run():
        assert [step(1), step(2, scale=3), step(3), step(4)] == [1, 2, 3, 4]
    assert calls == [1, 6, 3, 4]
    (parts,) = timeline.runs
    assert parts == {'step': 2. + 2. + 2. + 1.5, 'between steps': 1. + 0.5,
                     'epoch ends': 4., 'before and after': 1. + 6.}
    assert sum(parts.values()) == 20.
    assert timeline.medians() == parts
    with pytest.raises(RuntimeError, match='no call of the wrapped step'):
        with bench.StepTimeline(2).run():
            pass
    with pytest.raises(ValueError, match='`steps_per_epoch` must be a positive int, got 0'):
        bench.StepTimeline(0)


def test_paired_ratio_is_unclear_when_the_spread_straddles_the_target(bench):
    base = bench.Samples(wall=[1.] * 4, cpu=[0.] * 4)
    cand = bench.Samples(wall=[0.95, 1.0, 1.05, 1.1], cpu=[0.] * 4)
    paired = bench.paired_ratio(base, cand)
    low, high = paired.quartiles
    assert low < 1.02 < high
    assert paired.decide(at_most=1.02) == 'unclear'
    assert paired.spread == pytest.approx((high - low) / paired.median)
    with pytest.raises(ValueError, match='same rounds, got 4 and 3 runs'):
        bench.paired_ratio(base, bench.Samples(wall=[1.] * 3, cpu=[0.] * 3))
    with pytest.raises(ValueError, match='exactly one of `at_least` and `at_most`'):
        paired.decide()


def test_only_the_with_block_is_timed_and_entries_add_up(bench):
    clock = counting_clock()

    def run(watch):
        clock()                        # set-up: not timed
        for _ in range(2):
            with watch:
                clock()                # each entry: enter, this, exit = 2 ticks
        clock()                        # checks: not timed

    samples = bench.time_alternating({'only': run}, repeats=2, cpu_clock=clock)
    assert samples['only'].cpu == [4, 4]


def test_samples_best_median_and_scaling(bench):
    s = bench.Samples(wall=[3., 1., 2., 10.], cpu=[1., 1., 2., 2.])
    assert (s.best, s.median, s.cpu_best, s.cpu_median) == (1., 2.5, 1., 1.5)
    us = s.scaled(1e6 / 4)
    assert us.wall == [750000., 250000., 500000., 2500000.]
    assert us.cpu == [250000., 250000., 500000., 500000.]


def test_whole_call_times_the_call_and_returns_its_result(bench):
    watch = bench.Stopwatch(counting_clock())
    assert bench.whole_call(lambda: 'done')(watch) == 'done'
    assert watch.cpu == 1


@pytest.mark.parametrize('runs, repeats, message', [
    ({}, 1, '`runs` must name at least one contestant, got {}'),
    ({'a': None}, 0, '`repeats` must be a positive int, got 0'),
    ({'a': None}, True, '`repeats` must be a positive int, got True'),
])
def test_time_alternating_rejects_bad_arguments(bench, runs, repeats, message):
    with pytest.raises(ValueError, match=f'^{re.escape(message)}$'):
        bench.time_alternating(runs, repeats)


def test_format_table_aligns_columns_under_a_rule(bench):
    text = bench.format_table(('case', 'value', 'met'),
                              [('short', '1.5', 'yes'), ('a longer case', '12.25', '')],
                              align='lrl')
    assert text.splitlines() == [
        'case           value  met',
        '-------------  -----  ---',
        'short            1.5  yes',
        'a longer case  12.25',
    ]


@pytest.mark.parametrize('align, rows, message', [
    ('lr', [], '`align` must be one of "l"/"r" per column (3), got \'lr\''),
    ('lrx', [], '`align` must be one of "l"/"r" per column (3), got \'lrx\''),
    ('lrr', [('a', 'b')], "each row must have 3 cells, got ('a', 'b')"),
])
def test_format_table_rejects_mismatched_shapes(bench, align, rows, message):
    with pytest.raises(ValueError, match=f'^{re.escape(message)}$'):
        bench.format_table(('x', 'y', 'z'), rows, align)


def test_rows_survive_the_json_hand_over(bench, tmp_path):
    rows = [bench.Row('noop', 'bare loop', 0.5, 2.0, 'µs/step', 'diff ≤ 2 µs', True),
            bench.Row('fit', 'keras', 0., 3.0, 'steps/s')]
    path = str(tmp_path / 'rows.json')
    bench.write_rows(path, rows)

    assert bench.read_rows(path) == rows
    assert [r['ratio'] for r in json.loads(Path(path).read_text(encoding='utf-8'))] \
        == [4.0, float('inf')]
    assert [bench.met_text(r.met) for r in rows] == ['yes', '']
    bench.write_rows(None, rows)   # no path: nothing written, no error


RECORDING_SCRIPT = SCRIPT.parent / 'bench_recording.py'


def test_bench_recording_quick_run_prints_the_table(quick):
    out = quick.out(RECORDING_SCRIPT.name)
    summary = out[out.index('Summary'):]
    lines = summary.splitlines()
    for column in ('case', 'best µs/step', 'median µs/step', 'difference µs/step', 'target',
                   'met'):
        assert column in lines[1], lines[1]
    rows = {line.split('  ')[0].strip(): line for line in lines[3:]}
    assert 'TrainLoop, no Experiment' in rows
    for case in ('in an Experiment, flush_secs=0 (a write per epoch)',
                 'in an Experiment, flush_secs=1 (default)'):
        assert rows[case].rstrip().endswith(('yes', 'no')), rows[case]


STATE_FORMAT_SCRIPT = SCRIPT.parent / 'bench_state_format.py'


def test_bench_state_format_quick_run_prints_both_paths_and_the_ratio(quick):
    out = quick.out(STATE_FORMAT_SCRIPT.name)
    assert 'pickle µs' in out and 'state.npz µs' in out and 'ratio' in out
    for case in ('encode + write a file', 'encode into memory'):
        assert re.search(rf'^{re.escape(case)}\s+[\d.]+\s+[\d.]+\s+[\d.]+', out, re.M), out
    rows = quick.rows(STATE_FORMAT_SCRIPT.name)
    assert [r['baseline'] for r in rows] == ['pickle', 'pickle']
    assert rows[0]['target'] == '<= 1.0x' and rows[0]['met'] in (True, False)
    assert quick.left_over(STATE_FORMAT_SCRIPT.name) == []   # the temporary files are gone


def test_paired_ratio_decides_on_the_confidence_interval_of_the_median(bench):
    # 41 rounds: the interval is the ratios of ranks 14 and 26 (of 0..40), inside the quartiles
    base = bench.Samples(wall=[1.] * 41, cpu=[0.] * 41)
    cand = bench.Samples(wall=[1. + i / 1000 for i in range(41)], cpu=[0.] * 41)
    paired = bench.paired_ratio(base, cand)
    assert paired.interval == pytest.approx((1.014, 1.026))
    assert paired.quartiles == pytest.approx((1.010, 1.030))
    assert paired.decide(at_most=1.027) == 'yes'      # the whole interval, not the IQR
    assert paired.decide(at_most=1.02) == 'unclear'
    assert paired.decide(at_most=1.013) == 'no'


# ------------------------------------------------- profile_overhead.py
PROFILE_SCRIPT = SCRIPT.parent / 'profile_overhead.py'


@pytest.fixture(scope='module')
def profile_overhead():
    """``benchmarks/profile_overhead.py`` as a module (its ``sys.path`` entry removed after)."""
    path, bench_module = list(sys.path), sys.modules.get('_bench')
    spec = importlib.util.spec_from_file_location('profile_overhead', PROFILE_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules['profile_overhead'] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:   # as it was: the `bench` fixture may hold its own `_bench` there
        del sys.modules['profile_overhead']
        if bench_module is None:
            sys.modules.pop('_bench', None)
        else:
            sys.modules['_bench'] = bench_module
        sys.path[:] = path


def test_read_profile_splits_the_samples_at_the_step_and_ranks_the_rest(profile_overhead):
    lines = [
        # before the timed loop: left out
        '<module> (run.py:3);warm_up (run.py:9);step (a.py:1) 50\n',
        # the step: a frame of a tf.function call below the root
        '<module> (run.py:5);_profiled_runs (run.py:20);run (t.py:4);'
        'error_handler (tensorflow/python/util/traceback_utils.py:150);'
        '__call__ (tensorflow/python/eager/polymorphic_function/polymorphic_function.py:9) 70\n',
        # outside the step, two lines of one function: counted under one name
        '<module> (run.py:5);_profiled_runs (run.py:20);run (t.py:4);'
        'print_logs (r.py:10);format (c.py:3) 12\n',
        '<module> (run.py:5);_profiled_runs (run.py:20);run (t.py:7);'
        'print_logs (r.py:11) 5\n',
        '<module> (run.py:5);_profiled_runs (run.py:22) 3\n',
        '\n',
    ]
    p = profile_overhead.read_profile(lines)
    assert (p.total, p.in_step, p.outside) == (90, 70, 20)
    assert p.inclusive['run (t.py)'] == 17
    assert p.inclusive['print_logs (r.py)'] == 17
    assert p.own == {'format (c.py)': 12, 'print_logs (r.py)': 5,
                     '_profiled_runs (run.py)': 3}
    assert p.share(p.outside) == pytest.approx(20 / 90)

    with pytest.raises(ValueError, match='line 2 of the profile does not end in a sample count'):
        profile_overhead.read_profile(['a (b.py:1) 3\n', 'a (b.py:1);c (d.py:2)\n'])


def test_profile_overhead_quick_run_prints_the_padded_comparison(
        profile_overhead, monkeypatch, capsys):
    """Its quick mode, run here (this process is eager and has TensorFlow already)."""
    monkeypatch.setattr(sys, 'argv', [str(PROFILE_SCRIPT), '--quick', '--no-profile'])
    assert profile_overhead.main() == 0
    out = capsys.readouterr().out
    warm = re.search(r"Trainer's own Python, warm \(no-op step\): ([\d.]+) µs a step, "
                     r'([\d.]+) µs more at an epoch end', out)
    assert warm, out
    rows = {line.split('  ')[0]: line.split() for line in out.splitlines()
            if line.startswith(('bare ', 'padded hand loop ', 'Trainer '))}
    assert set(rows) == {'bare', 'padded hand loop', 'Trainer'}, out
    for name in ('padded hand loop', 'Trainer'):
        speed = float(rows[name][-2])
        assert 0 < speed < 2, rows[name]


# ------------------------------------------------- the other scripts, and run_all.py
def test_bench_checkpoint_store_quick_run_prints_both_saves(quick):
    out = quick.out('bench_checkpoint_store.py')
    for case in ('fsync on (durable=True)', 'fsync off (durable=False)'):
        assert re.search(rf'^{re.escape(case)}\s+[\d.]+\s+[\d.]+\s+[\d.]+$', out, re.M), out
    assert re.search(r'^fsync adds -?[\d.]+ ms per save \([\d.]+x\)$', out, re.M), out
    (row,) = quick.rows('bench_checkpoint_store.py')
    assert (row['case'], row['baseline'], row['unit']) == (
        'checkpoint save, 1M params, fsync', 'durable=False', 'ms')
    assert quick.left_over('bench_checkpoint_store.py') == []


def test_bench_checkpoint_async_quick_run_prints_both_parts(quick):
    out = quick.out('bench_checkpoint_async.py')
    saves = out[out.index('1. The time a save blocks the loop'):]
    for case in ('tf.train.Checkpoint.write', 'CheckpointSaver async, back to back',
                 'Saver.save [graph]', 'CheckpointSaver async [graph]'):
        assert re.search(rf'^{re.escape(case)}\s+[\d.]+', saves, re.M), saves
    mlp = out[out.index('2. A digits MLP in a TrainLoop saving checkpoints'):]
    for case in ('no checkpoints', 'sync, every 10 steps', 'async, every 100 steps'):
        assert re.search(rf'^{re.escape(case)}\s+[\d,]+\s+[\d.]+$', mlp, re.M), mlp
    rows = quick.rows('bench_checkpoint_async.py')
    assert [r['case'] for r in rows][:4] == [
        'async save blocks the loop, 1M params [eager]',
        'async save blocks the loop, 1M params [eager]',
        'async save back to back, 1M params [eager]',
        'async save blocks the loop, 1M params [graph]']
    assert rows[0]['met'] in (True, False) and rows[3]['met'] in (True, False)
    assert quick.left_over('bench_checkpoint_async.py') == []


def test_bench_memory_quick_run_prints_copies_per_feature_and_style(quick):
    out = quick.out('bench_memory.py')
    table = out[out.index('Peak host memory (RSS) over the bare loop'):]
    assert re.search(r'^bare loop\s+\([\d.]+ MiB\)\s+\([\d.]+ MiB\)$', table, re.M), table
    for label, target in (('early_stopping=True', '1.2'), ('checkpoint_async=True', '1.2'),
                          ('sync checkpoints every 2 steps', '0.3')):
        assert re.search(rf'^{re.escape(label)}\s+-?[\d.]+\s+-?[\d.]+\s+<= {target}$', table,
                         re.M), table
    rows = quick.rows('bench_memory.py')
    assert len(rows) == 8 and {r['unit'] for r in rows} == {'copies'}
    assert [r['case'] for r in rows][:2] == ['host memory, early_stopping=True [eager]',
                                             'host memory, early_stopping=True [graph]']


def test_bench_results_quick_run_prints_the_queries(quick):
    out = quick.out('bench_results.py')
    assert 'built 200 runs x' in out
    for case in ('representative query', 'top 10 by valid_loss', 'write one epoch, 20 metrics',
                 '  raw sqlite3, same rows'):
        assert re.search(rf'^{re.escape(case)}\s', out, re.M), out
    rows = quick.rows('bench_results.py')
    assert rows[0]['case'] == 'results store: representative query (200 runs)'
    assert rows[-1]['baseline'] == 'raw sqlite3 INSERT transaction'


def test_bench_state_quick_run_prints_both_styles(quick):
    out = quick.out('bench_state.py')
    for style in ('eager', 'graph'):
        assert f'{style}: 1,001,500 parameters' in out
        for part in ('early-stopping snapshot', 'early-stopping restore',
                     'checkpoint save (loop state)', 'checkpoint save (+ snapshot)'):
            assert re.search(rf'^{style}: {re.escape(part)}\s+[\d.]+\s+[\d.]+\s+[\d.]+', out,
                             re.M), out
    assert len(quick.rows('bench_state.py')) == 8


def test_bench_health_quick_run_prints_the_weight_average_rows(quick):
    out = quick.out('bench_health.py')
    summary = out[out.index('Summary'):]
    for case in ('WeightAverage(manual=True) attached, idle',
                 'WeightAverage, the loop updates it (one call more per step), digits MLP',
                 'WeightAverage(manual=True), update() inside the step, digits MLP',
                 'WeightAverage memory: averages over parameters',
                 'LearningRateFinder, 10 digits MLP steps'):
        assert re.search(rf'^{re.escape(case)}\s.*(yes|no)$', summary, re.M), summary
    rows = {r['case']: r for r in quick.rows('bench_health.py')}
    memory = rows['WeightAverage memory: averages over parameters']
    assert memory['value'] == memory['baseline_value'] > 0   # one copy: 64*128+128+128*10+10


def test_run_all_quick_prints_every_scripts_rows_in_one_table(quick):
    assert quick.proc.returncode == 0, quick.proc.stdout[-3000:] + quick.proc.stderr[-3000:]
    out = quick.proc.stdout
    took = re.search(r'^--quick: [\d.]+ s in all; each script \(wall s\): (.*)$', out, re.M)
    assert took, out[-3000:]
    assert re.findall(r'(bench_\w+\.py) [\d.]+', took[1]) == [
        name for name in took[1].split()[::2]]          # one figure a script
    table = out[out.index('(--quick: smoke sizes, not figures)'):]
    header = next(line for line in table.splitlines() if line.startswith('case '))
    assert re.split(r'\s{2,}', header.strip()) == [
        'case', 'unit', 'baseline', 'baseline value', 'tfsnippet', 'ratio', 'target', 'met']
    scripts = sorted(path.name for path in SCRIPT.parent.glob('bench_*.py'))
    assert sorted(path.name[:-len('.json')] for path in quick.dir.glob('*.json')) == scripts
    for name in scripts:      # every benchmark ran, and its rows are in the table
        for row in quick.rows(name):
            assert row['case'] in table, f'{name}: no row {row["case"]!r} in the table'
