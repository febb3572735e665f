"""``python -m tfsnippet.search``: a search whose trials each run a script in its own process."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import Any

from ..experiment.store import ResultsStore
from ..utils.status import PREEMPTED_EXIT_CODE
from .core import (ENV_METRIC, ENV_PRUNER, ENV_ROOT, ENV_RUN, ENV_STORAGE, ENV_STUDY, ENV_TRIAL,
                   TrialJob, TrialRunner, check_definition, local_root, make_pruner,
                   missing_metric_error, open_storage, open_study, run_id_of, seeded_sampler,
                   trial_value)
from .processes import end_with_parent
from .space import Dimension, override_args, parse_space_arg

__all__ = ['main', 'USAGE_EXIT_CODE']

#: The exit status of a script that refused its command line (argparse): the overrides
#: do not fit its config, and the search stops.
USAGE_EXIT_CODE = 2

_EPILOG = """\
Each trial runs `python -m tfsnippet.search.child SCRIPT [ARGS...] --NAME VALUE...`
(with --workers N, as N workers of `python -m tfsnippet.launch`):
the script's own spt.Experiment records the trial's run <root>/<study>-tNNNN (the
root given here, whatever the script says), its first TrainLoop reports METRIC to
the trial each epoch and is pruned as the pruner says.  Running the same command
again continues the study: --trials counts all its trials; trials of a search that
was killed or preempted are resumed from their checkpoints.  A trial's process gets
SIGTERM when the search dies, even by SIGKILL (Linux), and holds its run's lock
(<root>/.tfsnippet-search/<run>.lock) while it lives: a trial still run by a live
process is not resumed a second time.  A trial whose process
exits 143 (preempted) or is killed by a signal is left running, no new trial
starts, and the search exits 143 once the others are done: run it again.
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='python -m tfsnippet.search', epilog=_EPILOG, allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description='Search hyperparameters with Optuna; each trial runs an spt.Experiment '
                    'script in its own process.')
    parser.add_argument('--root', required=True, help='the directory of the runs, their '
                        'results store and the study journal')
    parser.add_argument('--study', required=True, help='the name of the study')
    parser.add_argument('--trials', type=int, required=True,
                        help='how many trials the study has in all when the search ends')
    parser.add_argument('--jobs', type=int, default=1, help='trials run at once')
    parser.add_argument('--workers', type=int, default=1, metavar='N',
                        help='run each trial as N MultiWorkerMirroredStrategy workers on this '
                             'machine, through `python -m tfsnippet.launch --workers N` (the '
                             'script makes its strategy; only the chief talks to the study)')
    parser.add_argument('--space', action='append', default=[], metavar='SPEC',
                        help='NAME=int:LOW:HIGH[:log], NAME=float:LOW:HIGH[:log] or '
                             'NAME=categorical:A,B,C (repeat for each field)')
    parser.add_argument('--metric', default='valid_loss', help='the metric optimized')
    parser.add_argument('--direction', default='minimize', choices=('minimize', 'maximize'))
    parser.add_argument('--storage', default=None, help='an Optuna storage URL or a journal '
                        'file (default: <root>/<study>.optuna-journal)')
    parser.add_argument('--pruner', default='median', help='median[:WARMUP_STEPS[:STARTUP_'
                        'TRIALS]], hyperband, halving or none (default: median)')
    parser.add_argument('--seed', type=int, default=None,
                        help="the TPE sampler's seed; a continued study's sampler is seeded "
                             "with SEED + the number of trials it has, so that it draws new "
                             "points")
    parser.add_argument('command', nargs=argparse.REMAINDER,
                        help='-- SCRIPT [ARGS...]: the script of a trial and its arguments')
    return parser


class _Processes:
    """The trials' processes: SIGTERM to the search goes to each of them, and (on Linux) the
    kernel sends them SIGTERM when the search dies, even by SIGKILL."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: set[subprocess.Popen[Any]] = set()
        self.terminated = False

    def start(self, command: list[str], env: dict[str, str],
              pass_fds: Sequence[int] = ()) -> subprocess.Popen[Any] | None:
        """Start a trial's process (from the thread that waits for it: the parent-death
        signal comes when that thread ends); ``None`` once the search was terminated."""
        with self._lock:
            if self.terminated:
                return None
            proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                                    pass_fds=tuple(pass_fds), preexec_fn=end_with_parent())
            self._live.add(proc)
            return proc

    def done(self, proc: subprocess.Popen[Any]) -> None:
        with self._lock:
            self._live.discard(proc)

    def terminate(self, signum: int, frame: Any) -> None:
        with self._lock:
            self.terminated = True
            for proc in self._live:
                try:
                    proc.send_signal(signal.SIGTERM)
                except OSError:
                    pass


def _child_script(root: str) -> str:
    """A script under `root` that runs :func:`tfsnippet.search.child.main` (the launcher
    starts a file, not ``-m``); written once, replaced atomically."""
    path = os.path.join(root, '.tfsnippet-search-child.py')
    text = 'from tfsnippet.search.child import main\n\nmain()\n'
    try:
        with open(path, encoding='utf-8') as f:
            if f.read() == text:
                return path
    except OSError:
        pass
    os.makedirs(root, exist_ok=True)
    tmp = f'{path}.{os.getpid()}.{threading.get_ident()}.tmp'
    with open(tmp, 'w', encoding='utf-8') as f:
        f.write(text)
    os.replace(tmp, path)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (143 when preempted)."""
    parser = _parser()
    args = parser.parse_args(argv)
    command = list(args.command)
    if command[:1] == ['--']:
        command = command[1:]
    if not command:
        parser.error('give the script of a trial after `--`: -- script.py [args...]')
    if not args.space:
        parser.error('give at least one `--space NAME=KIND:...`')
    if args.trials < 1 or args.jobs < 1:
        parser.error(f'`--trials` and `--jobs` must be >= 1, got {args.trials} and {args.jobs}')
    if args.workers < 1:
        parser.error(f'`--workers` must be >= 1, got {args.workers}')
    space: dict[str, Dimension] = {}
    try:
        for text in args.space:
            name, dim = parse_space_arg(text)
            if name in space:
                raise ValueError(f'`--space` names {name!r} twice')
            space[name] = dim
        check_definition(args.metric, args.direction)
        pruner_spec = args.pruner
        make_pruner(pruner_spec)
        root = local_root(args.root, '--root')
    except (TypeError, ValueError) as e:
        parser.error(str(e))
    storage, spec = open_storage(args.storage, root, args.study)
    assert spec is not None
    sampler = seeded_sampler(args.seed, storage, args.study) if args.seed is not None else None
    try:
        study = open_study(args.study, storage, args.metric, args.direction, space,
                           sampler=sampler)
    except ValueError as e:
        print(f'python -m tfsnippet.search: error: {e}', file=sys.stderr)
        return USAGE_EXIT_CODE
    processes = _Processes()
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, processes.terminate)
    else:   # pragma: no cover - called from a thread (tests)
        previous = None
    refused: list[str] = []

    def run_one(job: TrialJob) -> tuple[str, Any]:
        params = {name: job.trial.params[name] for name in space}
        env = {**os.environ, ENV_STUDY: args.study, ENV_STORAGE: spec, ENV_ROOT: root,
               ENV_TRIAL: str(job.number), ENV_RUN: job.run_id, ENV_METRIC: args.metric,
               ENV_PRUNER: pruner_spec}
        if args.workers > 1:   # the launcher runs a file: a two-line one that runs the child
            cmd = [sys.executable, '-m', 'tfsnippet.launch', '--workers', str(args.workers),
                   _child_script(root), *command, *override_args(params)]
        else:
            cmd = [sys.executable, '-m', 'tfsnippet.search.child', *command,
                   *override_args(params)]
        print(f'[search] trial {job.number} ({job.run_id}{", resumed" if job.resumed else ""})'
              f': {" ".join(override_args(params))}', flush=True)
        lock = job.lock   # the trial's process holds its run's lock too, while it lives
        proc = processes.start(cmd, env, lock.pass_fds() if lock is not None else ())
        if proc is None:
            return 'preempted', SystemExit(PREEMPTED_EXIT_CODE)
        if lock is not None:
            lock.note(proc.pid)
        try:
            code = proc.wait()
        finally:
            processes.done(proc)
        if code == PREEMPTED_EXIT_CODE or code < 0:   # preempted, or killed by a signal
            return 'preempted', SystemExit(PREEMPTED_EXIT_CODE)
        if code == USAGE_EXIT_CODE:
            refused.append(job.run_id)
            return 'error', RuntimeError(f'the script refused its command line (exit status '
                                         f'{code}): see its message above')
        try:
            with ResultsStore(root, create=False) as store:
                row = store.get_run(job.run_id)
        except (KeyError, ValueError) as e:
            return 'failed', RuntimeError(f'exit status {code}, and no run {job.run_id!r} in '
                                          f'{root!r}: does the script make an spt.Experiment? '
                                          f'({e})')
        if row.status == 'pruned':
            return 'pruned', None
        if code != 0:
            return 'failed', RuntimeError(f'exit status {code}')
        value = trial_value(row, args.metric)
        if value is None:
            refused.append(job.run_id)
            return 'error', missing_metric_error(row, args.metric)
        return 'complete', value

    def suggest(trial: Any) -> dict[str, Any]:
        return {name: dim.suggest(trial, name) for name, dim in space.items()}

    runner = TrialRunner(study, storage, root, lambda line: print(line, flush=True),
                         args.metric)
    try:
        runner.run(args.trials, args.jobs, run_one, suggest)
    except SystemExit as e:
        if e.code == PREEMPTED_EXIT_CODE:
            print(f'[search] preempted: exiting with status {PREEMPTED_EXIT_CODE}; run the same '
                  f'command again to resume', flush=True)
            return PREEMPTED_EXIT_CODE
        raise
    except Exception as e:  # noqa: BLE001 - a refused command line, a missing metric
        print(f'python -m tfsnippet.search: error: {e}', file=sys.stderr)
        return USAGE_EXIT_CODE if refused else 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if processes.terminated:
        return PREEMPTED_EXIT_CODE
    _print_summary(study, args.metric)
    return 0


def _print_summary(study: Any, metric: str) -> None:
    states: dict[str, int] = {}
    for t in study.get_trials(deepcopy=False):
        states[t.state.name.lower()] = states.get(t.state.name.lower(), 0) + 1
    print(f'[search] study {study.study_name!r}: '
          f'{", ".join(f"{n} {s}" for s, n in sorted(states.items()))}', flush=True)
    try:
        best = study.best_trial
    except ValueError:
        return
    params = ' '.join(override_args(best.params))
    print(f'[search] best: trial {best.number} ({run_id_of(study.study_name, best.number)}), '
          f'{metric} = {best.value:.6g}: {params}', flush=True)
