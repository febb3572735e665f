"""examples/multitask_digits.py keeps each TF style's run in its own folder, and a run
folder holding another model's checkpoints is refused in one line saying how to start fresh.

Both styles run one after the other in one working directory with their default
``--output-dir``, for one epoch; then the graph style is pointed at the eager
run's folder.
"""

import json
import os

import pytest

pytest.importorskip('sklearn', reason='the examples need scikit-learn (`pip install ".[test]"`)')

from tests.test_examples import EXAMPLES_DIR, Run  # noqa: E402

SCRIPT = EXAMPLES_DIR / 'multitask_digits.py'


@pytest.fixture(scope='module')
def runs(tmp_path_factory, fork_server):
    """``{name: Run}``: 'eager', then 'graph' in the same directory; then 'graph on eager'
    (the graph style pointed at the eager run's folder), beside 'graph'; forked from the
    session's server (``fork_server``)."""
    work_dir = tmp_path_factory.mktemp('multitask_folders')
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='')
    runs = {'eager': Run([SCRIPT, '--epochs', 1], cwd=work_dir),
            'graph': Run([SCRIPT, '--epochs', 1, '--style', 'graph'], cwd=work_dir),
            'graph on eager': Run([SCRIPT, '--epochs', 1, '--style', 'graph', '--output-dir',
                                   os.path.join('runs', 'multitask_digits_eager')],
                                  cwd=work_dir)}
    try:
        runs['eager'].start(env, fork_server)
        runs['eager'].wait()
        for name in ('graph', 'graph on eager'):   # different folders: side by side
            runs[name].start(env, fork_server)
        for name in ('graph', 'graph on eager'):
            runs[name].wait()
    finally:
        for run in runs.values():
            run.kill()
    return work_dir, runs


def test_both_styles_run_one_after_the_other_in_one_directory(runs):
    work_dir, procs = runs
    for style in ('eager', 'graph'):
        assert procs[style].returncode == 0, procs[style].report
        result = json.loads(
            (work_dir / 'runs' / f'multitask_digits_{style}' / 'result.json').read_text())
        assert (result['style'], result['epochs_run']) == (style, 1)
        assert not any(line.startswith('Resume training') for line in procs[style].lines)
    assert sorted(os.listdir(work_dir / 'runs')) == ['multitask_digits_eager',
                                                     'multitask_digits_graph']


def test_a_folder_of_another_model_is_refused_in_one_line(runs):
    _, procs = runs
    run = procs['graph on eager']
    assert run.returncode == 2, run.report
    assert run.stdout == '', run.report    # refused before any training
    assert 'Traceback' not in run.stderr, run.report
    folder = os.path.join('runs', 'multitask_digits_eager')
    errors = [line for line in run.stderr.splitlines()   # not TensorFlow's start-up lines
              if line.startswith('multitask_digits.py') or 'fresh' in line]
    assert errors == [
        f'multitask_digits.py: error: {folder} holds the checkpoints of another model, not '
        f'of this --style graph one: to start fresh, pass another --output-dir or delete '
        f'{os.path.join(folder, "checkpoints")}'], run.report
