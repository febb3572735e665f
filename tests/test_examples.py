"""Run each example script end to end, for two epochs, as a user would.

Every example is started at once in its own process, each with its own run
folder; the processes are forked from one that imported TensorFlow, Keras and
scikit-learn once (module fixture ``server``, `tests.helpers.forkserver`), since
their start-up was most of their time.  Then the tests read
what they printed and wrote: the tagged epoch lines, the test accuracy,
``result.json``, the TensorBoard event files and the checkpoints.

``digits_resume.py`` runs twice more on a third folder: interrupted by
``--interrupt-at-step`` (as by Ctrl+C), then again to resume; its final
``result.json`` must equal that of its uninterrupted run.

The eager usage example in README.rst is run as well, so that it keeps working.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

pytest.importorskip('sklearn', reason='the examples need scikit-learn (`pip install ".[test]"`)')
pytest.importorskip(
    'tensorboard.backend.event_processing.event_accumulator',
    reason='reading the event files needs tensorboard (`pip install ".[test]"`)')

from tests.helpers import read_scalars  # noqa: E402

ROOT_DIR = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = ROOT_DIR / 'examples'
SCRIPTS = ['digits_eager.py', 'digits_graph.py', 'digits_trainer.py', 'digits_resume.py']
README_SNIPPET = 'README.rst usage'
INTERRUPTED = 'digits_resume.py interrupted'
RESUMED = 'digits_resume.py resumed'

EPOCHS = 2
STEPS_PER_EPOCH = 34       # 1,078 training digits in batches of 32
INTERRUPT_AT_STEP = 60     # in epoch 2; digits_resume.py saves every 50 steps by default
TIMEOUT = 300              # a guard against a hung process, not an expected duration


def readme_usage_code() -> str:
    """The first ``code-block:: python`` of README.rst, dedented."""
    lines = (ROOT_DIR / 'README.rst').read_text(encoding='utf-8').splitlines()
    start = lines.index('.. code-block:: python') + 1
    code = []
    for line in lines[start:]:
        if line.strip() and not line.startswith('    '):
            break
        code.append(line[4:])
    return '\n'.join(code).strip() + '\n'


class Run:
    """One process: its command, then its exit status and output."""

    def __init__(self, args, cwd, output_dir=None):
        self.args = [sys.executable, *map(str, args)]
        self.cwd = cwd
        self.output_dir = output_dir
        self.proc = None
        self.returncode = self.stdout = self.stderr = None
        self.left_result = None  # whether result.json was there when the process ended

    def start(self, env, server=None):
        """Start the process, forked by `server` (a `ForkServer`) when given."""
        if server is None:
            self.proc = subprocess.Popen(self.args, cwd=str(self.cwd), env=env,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True)
            return
        self._stderr = tempfile.TemporaryFile('w+')
        self.proc = server.start(self.args[1:], cwd=self.cwd, env=env,
                                 stdout=subprocess.PIPE, stderr=self._stderr)

    def wait(self):
        if isinstance(self.proc, subprocess.Popen):
            self.stdout, self.stderr = self.proc.communicate(timeout=TIMEOUT)
        else:
            guard = threading.Timer(TIMEOUT, self.proc.kill)
            guard.start()
            self.stdout = self.proc.stdout.read()
            self.proc.stdout.close()
            self.proc.wait()
            guard.cancel()
            self._stderr.seek(0)
            self.stderr = self._stderr.read()
            self._stderr.close()
        self.returncode = self.proc.returncode
        if self.output_dir is not None:
            self.left_result = (self.output_dir / 'result.json').exists()

    def kill(self):
        if self.proc is None or self.returncode is not None:
            return
        self.proc.kill()
        if isinstance(self.proc, subprocess.Popen):
            self.proc.communicate()
        else:
            self.proc.wait()

    @property
    def lines(self):
        return self.stdout.splitlines()

    @property
    def report(self):
        return (f'command: {" ".join(self.args)}\nexit status: {self.returncode}\n'
                f'stdout:\n{self.stdout[-4000:]}\nstderr:\n{self.stderr[-4000:]}')

    def result(self):
        return json.loads((self.output_dir / 'result.json').read_text())


def example_run(tmp_path_factory, script, *extra, output_dir=None):
    work_dir = tmp_path_factory.mktemp(script.replace('.py', ''))
    output_dir = output_dir or work_dir / 'out'
    return Run([EXAMPLES_DIR / script, '--epochs', EPOCHS, '--output-dir', output_dir, *extra],
               cwd=work_dir, output_dir=output_dir)


ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='')


@pytest.fixture(scope='module')
def server(fork_server):
    """Forks each run from the session's process that imported TensorFlow (``fork_server``,
    tests/conftest.py)."""
    return fork_server


@pytest.fixture(scope='module')
def runs(tmp_path_factory, server):
    """Run every example (and the resume pair) in parallel; return ``{name: Run}``."""
    env = ENV
    runs = {script: example_run(tmp_path_factory, script) for script in SCRIPTS}
    runs[INTERRUPTED] = example_run(tmp_path_factory, 'digits_resume.py',
                                    '--interrupt-at-step', INTERRUPT_AT_STEP)
    # the same command without the interruption, on the same run folder
    runs[RESUMED] = example_run(tmp_path_factory, 'digits_resume.py',
                                output_dir=runs[INTERRUPTED].output_dir)
    work_dir = tmp_path_factory.mktemp('readme')
    (work_dir / 'usage.py').write_text(readme_usage_code(), encoding='utf-8')
    runs[README_SNIPPET] = Run([work_dir / 'usage.py'], cwd=work_dir)

    try:
        for name, run in runs.items():
            if name != RESUMED:
                run.start(env, server)
        runs[INTERRUPTED].wait()
        runs[RESUMED].start(env, server)
        for run in runs.values():
            if run.returncode is None:
                run.wait()
    finally:
        for run in runs.values():
            run.kill()
    return runs


# ------------------------------------------------------------------ every example
@pytest.mark.parametrize('script', SCRIPTS)
def test_example_runs(script, runs):
    run = runs[script]
    assert run.returncode == 0, run.report

    lines = run.lines
    assert lines[0].startswith('Trainable Parameters'), run.report
    for epoch in range(1, EPOCHS + 1):
        tag = f'[Epoch {epoch}/{EPOCHS}, Step {epoch * STEPS_PER_EPOCH}, '
        assert sum(line.startswith(tag) for line in lines) == 1, run.report
    assert not any(line.startswith(f'[Epoch {EPOCHS + 1}/') for line in lines), run.report
    assert any(line.startswith('Restore early-stopping parameters') for line in lines), \
        run.report

    found = [re.fullmatch(r'test accuracy: (\S+)', line) for line in lines]
    values = [float(m.group(1)) for m in found if m]
    assert len(values) == 1, run.report
    assert 0.5 <= values[0] <= 1., run.report  # two epochs already reach about 0.8

    result = run.result()
    assert result['example'] == script.replace('.py', '')
    assert abs(result['test_accuracy'] - values[0]) < 1e-4
    assert result['epochs'] == EPOCHS
    assert result['epochs_run'] == EPOCHS
    assert result['steps_run'] == EPOCHS * STEPS_PER_EPOCH


@pytest.mark.parametrize('script', SCRIPTS)
def test_example_writes_tensorboard_scalars(script, runs):
    run = runs[script]
    assert run.returncode == 0, run.report
    summary_dir = run.output_dir / 'tensorboard'
    assert list(summary_dir.glob('events.out.tfevents.*')), sorted(run.output_dir.rglob('*'))

    scalars = read_scalars(summary_dir, in_step_order=False)
    assert {'metrics/loss', 'metrics/valid_loss', 'metrics/valid_acc'} <= set(scalars), scalars
    # the training loss of every step, the validation metrics after every epoch
    assert [s for s, _ in scalars['metrics/loss']] == \
        list(range(1, EPOCHS * STEPS_PER_EPOCH + 1))
    epoch_ends = [(e + 1) * STEPS_PER_EPOCH for e in range(EPOCHS)]
    assert [s for s, _ in scalars['metrics/valid_loss']] == epoch_ends
    # what was written is what the loop saw: the best validation loss is among them
    best = min(v for _, v in scalars['metrics/valid_loss'])
    assert best == pytest.approx(run.result()['best_valid_loss'], rel=1e-6)
    if script == 'digits_trainer.py':  # the learning rate, collected at each epoch's start
        assert [s for s, _ in scalars['metrics/lr']] == [0, STEPS_PER_EPOCH]


def checkpoint_steps(checkpoint_dir):
    """The steps of the checkpoints saved under `checkpoint_dir`, in order."""
    steps = []
    for state in checkpoint_dir.rglob('state.npz'):
        m = re.search(r'-(\d+)$', state.parent.name)
        assert m, state
        steps.append(int(m.group(1)))
    return sorted(steps)


@pytest.mark.parametrize('script', SCRIPTS)
def test_example_writes_checkpoints(script, runs):
    run = runs[script]
    assert run.returncode == 0, run.report
    steps = checkpoint_steps(run.output_dir / 'checkpoints')
    if script == 'digits_resume.py':   # every 50 steps, and the final state
        assert steps == [50, 2 * STEPS_PER_EPOCH]
    else:                              # after every epoch (the last two kept)
        assert steps == [STEPS_PER_EPOCH, 2 * STEPS_PER_EPOCH]


# ------------------------------------------------------------------ resuming
def test_resume_example_interrupted_run(runs):
    run = runs[INTERRUPTED]
    assert run.returncode == 130, run.report  # the exit status of a Ctrl+C
    assert f'Interrupted at epoch 2, step {INTERRUPT_AT_STEP}.' in run.stdout, run.report
    assert not any(line.startswith('test accuracy') for line in run.lines), run.report
    assert run.left_result is False, run.report
    # its step-50 checkpoint (the resumed run, which shares the folder, adds its final one)
    assert 50 in checkpoint_steps(run.output_dir / 'checkpoints'), run.report


def test_resume_example_resumed_run_matches_an_uninterrupted_run(runs):
    run = runs[RESUMED]
    assert run.returncode == 0, run.report
    resume_lines = [line for line in run.lines if line.startswith('Resume training: ')]
    assert len(resume_lines) == 1, run.report
    assert resume_lines[0].startswith('Resume training: epoch 2, step 50, '), run.report
    # it goes on inside epoch 2: no line for epoch 1 in this run
    assert not any(line.startswith('[Epoch 1/') for line in run.lines), run.report
    assert any(line.startswith(f'[Epoch 2/2, Step {2 * STEPS_PER_EPOCH}, ')
               for line in run.lines), run.report

    uninterrupted = runs['digits_resume.py']
    assert uninterrupted.returncode == 0, uninterrupted.report
    assert run.result() == uninterrupted.result()


# ------------------------------------------------------------------ README.rst
def test_readme_usage_example_runs(runs):
    run = runs[README_SNIPPET]
    assert run.returncode == 0, run.report
    lines = run.lines
    assert lines and lines[0].startswith('Trainable Parameters'), run.report
    assert any(line.startswith('[Epoch 10/10, ') for line in lines), run.report


# ------------------------------------------------------------ digits_sweep.py
SWEEP_LRS = ('0.0003', '0.001', '0.003')
SWEEP_RUNS = [f'lr-{lr}' for lr in SWEEP_LRS]
PREEMPTED_RUN = 'lr-0.001'


@pytest.fixture(scope='module')
def sweep(tmp_path_factory):
    """The sweep of three runs, one preempted and resumed (mirrored to MLflow if installed)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='')
    work_dir = tmp_path_factory.mktemp('digits_sweep')
    root = work_dir / 'runs'
    extra = []
    try:
        import mlflow  # noqa: F401
        extra = ['--mlflow', f'sqlite:///{work_dir}/mlflow.db']
    except ImportError:
        pass
    run = Run([EXAMPLES_DIR / 'digits_sweep.py', '--root', root, '--epochs', EPOCHS,
               '--lrs', ','.join(SWEEP_LRS), *extra], cwd=work_dir)
    try:
        run.start(env)
        run.wait()
    finally:
        run.kill()
    run.root = root
    run.mlflow_uri = extra[1] if extra else None
    return run


def test_sweep_runs_preempts_and_resumes(sweep):
    assert sweep.returncode == 0, sweep.report
    lines = sweep.lines
    for name in SWEEP_RUNS:
        status = 143 if name == PREEMPTED_RUN else 0
        assert f'{name}: exit status {status}' in lines, sweep.report
    assert f'{PREEMPTED_RUN} is preempted at epoch 1; resuming it' in lines, sweep.report
    assert f'{PREEMPTED_RUN} (resumed): exit status 0' in lines, sweep.report

    console = (sweep.root / PREEMPTED_RUN / 'console.log').read_text(encoding='utf-8')
    assert f'Preempted by SIGTERM at epoch 1, step {STEPS_PER_EPOCH}' in console
    assert f'Resume training: epoch 1, step {STEPS_PER_EPOCH}, ' in console
    assert console.count('test accuracy: ') == 1   # only the resumed run got there


def test_sweep_results_store_query_and_compare(sweep):
    import tfsnippet as spt

    assert sweep.returncode == 0, sweep.report
    rows = spt.results.query(sweep.root, order_by='best.valid_loss')
    assert sorted(r.run_id for r in rows) == sorted(SWEEP_RUNS)
    assert all(r.status == 'completed' and r.epoch == EPOCHS for r in rows)
    assert {r.run_id: r.config['optimizer']['lr'] for r in rows} == \
        {name: float(lr) for name, lr in zip(SWEEP_RUNS, SWEEP_LRS)}
    with spt.ResultsStore(sweep.root, create=False) as store:
        for name in SWEEP_RUNS:   # the resumed run too: both epochs, once each
            assert [e.epoch for e in store.epochs(name)] == [1, 2]

    # the printed query table: best first, as the store orders them
    out = sweep.stdout
    table = out[out.index('spt.results.query('):out.index('best: ')].splitlines()[3:]
    assert [line.split()[0] for line in table if line.strip()] == [r.run_id for r in rows]
    assert f'best: {rows[0].run_id}' in sweep.lines
    # the comparison: the one config field that differs, and the metrics
    compare = out[out.index('compare lr-0.0003 lr-0.001 lr-0.003'):]
    assert 'config (fields that differ)' in compare
    assert re.search(r'optimizer\.lr\s+0\.0003\s+0\.001\s+0\.003', compare), sweep.report
    assert re.search(r'results\.test_acc(\s+0\.\d+){3}', compare), sweep.report


def test_sweep_plot_and_mlflow(sweep):
    assert sweep.returncode == 0, sweep.report
    try:
        import matplotlib  # noqa: F401
        png = sweep.root / 'valid_loss.png'
        assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    except ImportError:
        assert '(matplotlib is not installed: no plot)' in sweep.lines
    if sweep.mlflow_uri is None:
        pytest.skip('MLflow is not installed')
    import mlflow
    client = mlflow.MlflowClient(sweep.mlflow_uri)
    experiment = client.get_experiment_by_name('digits_sweep')
    runs = client.search_runs([experiment.experiment_id])
    assert sorted((r.info.run_name, r.info.status, r.data.params['optimizer.lr'])
                  for r in runs) == [(name, 'FINISHED', lr)
                                     for name, lr in zip(SWEEP_RUNS, SWEEP_LRS)]
    resumed = next(r for r in runs if r.info.run_name == PREEMPTED_RUN)
    steps = [m.step for m in client.get_metric_history(resumed.info.run_id, 'valid_loss')]
    assert steps == [STEPS_PER_EPOCH, 2 * STEPS_PER_EPOCH]
    assert 'mlflow.search_runs (MLflow experiment' in sweep.stdout


# ------------------------------------------------------------ multitask_digits.py
# style -> (extra flags, steps per epoch): 'alternate' takes the 34 digit batches
# (of 32) and 34 coarse ones (of 64: two passes) in turn; 'together' takes one of each
MULTITASK = {'eager': (['--mode', 'alternate', '--valid-steps', '25'], 68),
             'graph': (['--mode', 'together'], 34)}


@pytest.fixture(scope='module')
def multitask(tmp_path_factory, server):
    """multitask_digits.py in both styles, in parallel; ``{style: Run}``."""
    env = ENV
    runs = {style: example_run(tmp_path_factory, 'multitask_digits.py', '--style', style,
                               *extra)
            for style, (extra, _) in MULTITASK.items()}
    try:
        for run in runs.values():
            run.start(env, server)
        for run in runs.values():
            run.wait()
    finally:
        for run in runs.values():
            run.kill()
    return runs


@pytest.mark.parametrize('style', list(MULTITASK))
def test_multitask_example_trains_both_tasks(style, multitask):
    run = multitask[style]
    assert run.returncode == 0, run.report
    steps = MULTITASK[style][1]
    epoch_lines = [line for line in run.lines if line.startswith('[Epoch ')]
    assert [line.split(',')[:2] for line in epoch_lines] == [
        [f'[Epoch {e}/{EPOCHS}', f' Step {e * steps}'] for e in range(1, EPOCHS + 1)], run.report
    for part in ('digit/loss: ', 'coarse/loss: ', 'digit/valid loss: ', 'coarse/valid acc: ',
                 'valid loss: '):
        assert part in epoch_lines[-1], run.report
    assert any(line.startswith('Best per task: digit/valid_loss ') for line in run.lines)
    result = run.result()
    assert result['steps_run'] == EPOCHS * steps
    # two epochs are enough for both heads to beat chance by far
    assert result['digit_test_accuracy'] > 0.6 and result['coarse_test_accuracy'] > 0.7
    assert sorted(result['best_task_valid_loss']) == ['coarse', 'digit']


@pytest.mark.parametrize('style', list(MULTITASK))
def test_multitask_example_writes_per_task_scalars(style, multitask):
    run = multitask[style]
    assert run.returncode == 0, run.report
    steps = MULTITASK[style][1]
    scalars = read_scalars(run.output_dir / 'tensorboard')
    for name in ('digit/loss', 'coarse/loss', 'digit/valid_loss', 'coarse/valid_loss',
                 'digit/valid_acc', 'coarse/valid_acc', 'valid_loss'):
        assert f'metrics/{name}' in scalars, sorted(scalars)
    valid_steps = [s for s, _ in scalars['metrics/valid_loss']]
    every = 25 if style == 'eager' else None   # validated every 25 steps as well
    expected = sorted({e * steps for e in range(1, EPOCHS + 1)} |
                      (set(range(every, EPOCHS * steps + 1, every)) if every else set()))
    assert valid_steps == expected
    # the combined metric is the mean of the tasks' (written at the same steps)
    digit = dict(scalars['metrics/digit/valid_loss'])
    coarse = dict(scalars['metrics/coarse/valid_loss'])
    for s, v in scalars['metrics/valid_loss']:
        assert v == pytest.approx((digit[s] + coarse[s]) / 2, rel=1e-5)
    assert checkpoint_steps(run.output_dir / 'checkpoints') == [steps, EPOCHS * steps]
