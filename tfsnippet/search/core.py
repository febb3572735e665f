"""What the search API and its command line share: the study and its storage, the
definition kept with it, which trials to resume, the trial runs and their values.

Nothing here imports TensorFlow: the command line's parent process stays light.
"""

from __future__ import annotations

import math
import os
import re
import socket
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import optuna

from ..experiment.store import ResultsStore, RunRow
from ..utils.status import RunPruned
from ..utils.text import close_matches_hint, typed_repr
from .processes import RunLock
from .space import Dimension, describe_space

__all__ = ['TrialPruned', 'DEFINITION_ATTR', 'TRIAL_ATTR', 'JOURNAL_SUFFIX',
           'open_storage', 'open_study', 'run_id_of', 'trial_value', 'TrialJob', 'TrialRunner',
           'ENV_STUDY', 'ENV_STORAGE', 'ENV_TRIAL', 'ENV_ROOT', 'ENV_RUN', 'ENV_METRIC',
           'ENV_PRUNER', 'make_pruner', 'seeded_sampler']

#: The study user attribute holding the search's definition (metric, direction, space).
DEFINITION_ATTR = 'tfsnippet.search'
#: The trial user attribute naming its run and who runs it: ``{'run_id', 'host', 'pid',
#: 'token'}`` (the token of the optimize call); one attribute, one write of the storage.
TRIAL_ATTR = 'tfsnippet.trial'
#: The suffix of the default journal file, ``<root>/<study>.optuna-journal``.
JOURNAL_SUFFIX = '.optuna-journal'

# what a trial's process reads (set by `python -m tfsnippet.search` for each trial)
ENV_STUDY = 'TFSNIPPET_SEARCH_STUDY'
ENV_STORAGE = 'TFSNIPPET_SEARCH_STORAGE'
ENV_TRIAL = 'TFSNIPPET_SEARCH_TRIAL'
ENV_ROOT = 'TFSNIPPET_SEARCH_ROOT'
ENV_RUN = 'TFSNIPPET_SEARCH_RUN'
ENV_METRIC = 'TFSNIPPET_SEARCH_METRIC'
ENV_PRUNER = 'TFSNIPPET_SEARCH_PRUNER'

_DIRECTIONS = ('minimize', 'maximize')
_SAFE = re.compile(r'[^A-Za-z0-9._-]+')
# the tokens of the optimize calls running in this process
_LIVE_OWNERS: set[str] = set()
_live_lock = threading.Lock()


class TrialPruned(optuna.TrialPruned, RunPruned):
    """Raised out of a trial's TrainLoop when the pruner stops it: Optuna records the
    trial as pruned, the :class:`~tfsnippet.Experiment` ends the run with status
    ``'pruned'``."""


# ------------------------------------------------------------------ storage and study
def local_root(root: Any, argument: str = 'root') -> str:
    """The absolute local folder of a search's runs (through :func:`tfsnippet.storage.resolve`).

    The search keeps its study journal and reads its trials' rows under `root`,
    which needs a local folder (a journal file cannot live on an object store).

    Raises:
        TypeError: `root` is not a path.
        ValueError: `root` is an object-store URL.
    """
    from ..storage import resolve
    location = resolve(root, argument=argument)
    if not location.is_local:
        raise ValueError(
            f'`{argument}` must be a local folder (the study journal and the trials\' rows '
            f'live there), got the URL {location.url!r}: give a local root, or a shared file '
            f'system reached by every machine, with `storage=` an Optuna RDB URL')
    return location.path


def open_storage(storage: Any, root: str, study: str) -> tuple[Any, str | None]:
    """The Optuna storage and, when it is one a trial's process can reopen, its spec.

    ``None``: a journal file ``<root>/<study>.optuna-journal``; a str with
    ``://`` (``postgresql://...``, ``sqlite:///...``): an Optuna storage
    URL; another str: a journal file at that path; anything else: an Optuna
    storage object, as it is (spec ``None``).
    """
    if storage is None:
        os.makedirs(root, exist_ok=True)
        storage = os.path.join(root, _SAFE.sub('-', study) + JOURNAL_SUFFIX)
    if isinstance(storage, (str, os.PathLike)):
        spec = os.fspath(storage)
        if '://' in spec:
            return optuna.storages.get_storage(spec), spec
        path = os.path.abspath(spec)
        from optuna.storages.journal import JournalFileBackend
        return optuna.storages.JournalStorage(JournalFileBackend(path)), path
    return storage, None


def make_pruner(spec: str | None) -> Any:
    """The pruner named by the command line's ``--pruner``: ``median[:WARMUP_STEPS[:STARTUP]]``,
    ``hyperband``, ``halving`` or ``none``.

    Raises:
        ValueError: `spec` is none of these.
    """
    if spec is None:
        return None
    kind, _, rest = spec.strip().lower().partition(':')
    texts = rest.split(':') if rest else []
    values = [int(t) for t in texts if t.isdigit()]
    if len(values) == len(texts):   # every number a non-negative int
        if kind == 'median' and len(values) <= 2:
            warmup = values[0] if values else 0
            startup = values[1] if len(values) > 1 else 5
            return optuna.pruners.MedianPruner(n_startup_trials=startup,
                                               n_warmup_steps=warmup)
        pruners = {'hyperband': optuna.pruners.HyperbandPruner,
                   'halving': optuna.pruners.SuccessiveHalvingPruner,
                   'none': optuna.pruners.NopPruner}
        if kind in pruners and not values:
            return pruners[kind]()
    raise ValueError(f'`--pruner` must be median[:WARMUP_STEPS[:STARTUP_TRIALS]], hyperband, '
                     f'halving or none, got {spec!r}')


def seeded_sampler(seed: Any, storage: Any, study: str) -> optuna.samplers.TPESampler:
    """A TPE sampler for study `study` seeded with ``seed + the number of trials it has``.

    A sampler seeded alike in each process would draw the points of the study's
    first trials again each time the search is run again (after a preemption,
    say); the trials already there move the seed, so a continued study draws
    new points, and the same history gives the same points.

    Raises:
        TypeError: `seed` is not an int.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f'`seed` must be an int, got {typed_repr(seed)}')
    try:
        done = storage.get_n_trials(storage.get_study_id_from_name(study))
    except KeyError:   # a new study
        done = 0
    return optuna.samplers.TPESampler(seed=seed + done)


def check_definition(metric: Any, direction: Any) -> None:
    if not isinstance(metric, str) or not metric or metric != metric.strip():
        raise TypeError(f'`metric` must be the name of a metric (a non-empty str), got '
                        f'{typed_repr(metric)}')
    if direction not in _DIRECTIONS:
        raise ValueError(f'`direction` must be \'minimize\' or \'maximize\', got '
                         f'{typed_repr(direction)}')


def open_study(name: str, storage: Any, metric: str, direction: str,
               space: Mapping[str, Dimension], sampler: Any = None,
               pruner: Any = None) -> optuna.Study:
    """Create study `name` in `storage` with the search's definition, or load it and
    check that the definition is the same.

    Raises:
        ValueError: The study exists with another metric, direction or space.
    """
    definition = {'metric': metric, 'direction': direction, 'space': describe_space(space)}
    try:
        study = optuna.load_study(study_name=name, storage=storage, sampler=sampler,
                                  pruner=pruner)
    except KeyError:
        study = optuna.create_study(study_name=name, storage=storage, sampler=sampler,
                                    pruner=pruner, load_if_exists=True,
                                    direction=optuna.study.StudyDirection[direction.upper()])
    saved = study.user_attrs.get(DEFINITION_ATTR)
    if saved is None:
        study_direction = study.direction.name.lower()
        if study_direction != direction and study.trials:
            raise ValueError(f'The study {name!r} optimizes in direction {study_direction!r}, '
                             f'not `direction` {direction!r}')
        study.set_user_attr(DEFINITION_ATTR, definition)
        return study
    differences = _differences(saved, definition)
    if differences:
        raise ValueError(f'The study {name!r} was made with another definition: '
                         f'{"; ".join(differences)}. Continue it with its own definition, or '
                         f'give another `study` name for the new one')
    return study


def _differences(saved: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    out = []
    for key in ('metric', 'direction'):
        if saved.get(key) != new[key]:
            out.append(f'{key} {saved.get(key)!r} (now {new[key]!r})')
    old_space, new_space = saved.get('space') or {}, new['space']
    for name in sorted(set(old_space) | set(new_space)):
        before, after = old_space.get(name), new_space.get(name)
        if before is None:
            out.append(f'space has no {name!r} (now {_dim_text(after)})')
        elif after is None:
            out.append(f'space has {name!r}: {_dim_text(before)} (now not searched)')
        elif before != after:
            out.append(f'space {name!r} is {_dim_text(before)} (now {_dim_text(after)})')
    return out


def _dim_text(described: Mapping[str, Any]) -> str:
    return ', '.join(f'{k}={v!r}' for k, v in described.items())


def run_id_of(study: str, number: int) -> str:
    """The run id of trial `number` of `study`: ``'<study>-t0003'``."""
    return f'{_SAFE.sub("-", study).strip(".-") or "search"}-t{number:04d}'


def trial_value(row: RunRow, metric: str) -> float | None:
    """The objective value of a finished run: its final result `metric` when it
    recorded one, else its best value of `metric`, else the last epoch's mean."""
    for values in (row.results, row.best, row.metrics):
        value = values.get(metric)
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            return float(value)
    return None


def missing_metric_error(row: RunRow, metric: str) -> RuntimeError:
    names = sorted(set(row.results) | set(row.best) | set(row.metrics))
    return RuntimeError(f'The run {row.run_id!r} recorded no `{metric}`, the search\'s '
                        f'`metric`: it recorded {names}{close_matches_hint(metric, names)}')


# ------------------------------------------------------------------ the runner
class TrialJob:
    """One trial to run: new, or a resumed one (the same trial and run), and the
    :class:`~tfsnippet.search.processes.RunLock` of its run, held while it runs (a
    trial's process inherits it through ``lock.pass_fds()``)."""

    def __init__(self, trial: optuna.Trial, run_id: str, resumed: bool,
                 lock: RunLock | None = None):
        self.trial = trial
        self.run_id = run_id
        self.resumed = resumed
        self.lock = lock

    @property
    def number(self) -> int:
        return int(self.trial.number)


class TrialRunner:
    """Runs a study to `n_trials` trials in all, with `n_jobs` threads, each trial through
    `run_one(job) -> ('complete', value) | ('pruned', None) | ('failed', error) |
    ('preempted', error)`.

    Trials left running by a process that is gone (killed, preempted) are resumed
    first, as the same trials, unless their run's lock is still held (a trial's
    process that outlived its search): such a trial is left to that process.  New
    trials are asked while the study has fewer than `n_trials`.  A preempted trial
    is left running (the next run resumes it) and no new trial starts after it; a
    failed one is told failed.  `metric` names the reported values in the log.
    """

    def __init__(self, study: optuna.Study, storage: Any, root: str, log: Callable[[str], Any],
                 metric: str = 'value'):
        self.study = study
        self.metric = metric
        self.storage = storage
        self.root = root
        self.log = log
        self._lock = threading.Lock()
        self._stop: BaseException | None = None
        self._errors: list[BaseException] = []
        self._token = uuid.uuid4().hex
        self._owner = {'host': socket.gethostname(), 'pid': os.getpid(), 'token': self._token}
        # the run locks of the trials to resume, taken when they were found stale
        self._locks: dict[int, RunLock] = {}

    def _trial_by_number(self, number: int) -> optuna.Trial:
        study_id = self.storage.get_study_id_from_name(self.study.study_name)
        trial_id = self.storage.get_trial_id_from_study_id_trial_number(study_id, number)
        return optuna.trial.Trial(self.study, trial_id)

    def _is_stale(self, frozen: optuna.trial.FrozenTrial) -> bool:
        owner = frozen.user_attrs.get(TRIAL_ATTR)
        if not isinstance(owner, dict):
            return False
        if owner.get('host') == socket.gethostname():
            pid: Any = owner.get('pid')
            if pid == os.getpid():
                with _live_lock:
                    return owner.get('token') not in _LIVE_OWNERS
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                return True
            except (OSError, TypeError, ValueError):
                return False
            return False
        # another machine: its run's heartbeat tells
        run_id = owner.get('run_id')
        try:
            with ResultsStore(self.root, create=False) as store:
                return store.get_run(str(run_id)).status in ('stale', 'preempted', 'failed')
        except (KeyError, ValueError, OSError):
            return False

    def _lock_free(self, frozen: optuna.trial.FrozenTrial) -> bool:
        """Take the run lock of a stale trial (kept until it runs); ``False``, said, when
        a live process holds it: a trial's process that outlived its search."""
        lock = RunLock(self.root, run_id_of(self.study.study_name, frozen.number))
        if lock.acquire():
            self._locks[frozen.number] = lock
            return True
        holder = lock.holder()
        self.log(f'[search] trial {frozen.number} is still run by '
                 f'{"a live process" if holder is None else f"process {holder}"} (its run\'s '
                 f'lock {lock.path} is held): not resumed')
        return False

    def _take_lock(self, number: int) -> RunLock:
        lock = RunLock(self.root, run_id_of(self.study.study_name, number))
        if not lock.acquire():
            raise RuntimeError(f'The run lock {lock.path} of the new trial {number} is held by '
                               f'process {lock.holder()}: is another search writing runs of '
                               f'study {self.study.study_name!r} under {self.root!r}?')
        return lock

    def run(self, n_trials: int, n_jobs: int, run_one: Callable[[TrialJob], tuple[str, Any]],
            suggest: Callable[[optuna.Trial], dict[str, Any]]) -> None:
        with _live_lock:
            _LIVE_OWNERS.add(self._token)
        try:
            running = self.study.get_trials(deepcopy=False,
                                            states=(optuna.trial.TrialState.RUNNING,))
            resume = [t.number for t in running if self._is_stale(t) and self._lock_free(t)]
            others = len(running) - len(resume)
            done = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED,
                    optuna.trial.TrialState.FAIL)
            finished = len(self.study.get_trials(deepcopy=False, states=done))
            budget = max(0, n_trials - finished - others - len(resume))
            queue: list[int | None] = [*resume, *([None] * budget)]
            if resume:
                self.log(f'[search] resuming trial{"s" if len(resume) > 1 else ""} '
                         f'{", ".join(map(str, resume))} of study {self.study.study_name!r}')

            def next_job() -> TrialJob | None:
                with self._lock:
                    if self._stop is not None or not queue:
                        return None
                    number = queue.pop(0)
                    if number is None:
                        trial = self.study.ask()
                        resumed = False
                    else:
                        trial, resumed = self._trial_by_number(number), True
                    run_id = run_id_of(self.study.study_name, trial.number)
                    lock = self._locks.pop(trial.number, None) or self._take_lock(trial.number)
                    trial.set_user_attr(TRIAL_ATTR, {'run_id': run_id, **self._owner})
                    suggest(trial)
                    return TrialJob(trial, run_id, resumed, lock)

            def worker() -> None:
                while True:
                    try:
                        job = next_job()
                    except BaseException as e:  # noqa: BLE001 - handed to the caller
                        self._fail_all(e)
                        return
                    if job is None:
                        return
                    self._run_job(job, run_one)

            if n_jobs == 1:
                worker()
            else:
                threads = [threading.Thread(target=worker, name=f'tfsnippet-search-{i}')
                           for i in range(n_jobs)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
        finally:
            with _live_lock:
                _LIVE_OWNERS.discard(self._token)
            for lock in self._locks.values():   # trials to resume that did not run
                lock.release()
            self._locks.clear()
        if self._stop is not None:
            raise self._stop

    def _last_report(self, number: int) -> str:
        """`` at epoch E: METRIC = V``, the trial's last report (its loop reports each epoch)."""
        study_id = self.storage.get_study_id_from_name(self.study.study_name)
        trial_id = self.storage.get_trial_id_from_study_id_trial_number(study_id, number)
        reports = self.storage.get_trial(trial_id).intermediate_values
        if not reports:
            return ''
        step = max(reports)
        return f' at epoch {step}: {self.metric} = {reports[step]:.6g}'

    def _fail_all(self, error: BaseException) -> None:
        with self._lock:
            if self._stop is None:
                self._stop = error

    def _run_job(self, job: TrialJob, run_one: Callable[[TrialJob], tuple[str, Any]]) -> None:
        try:
            state, value = run_one(job)
        except BaseException as e:  # noqa: BLE001 - the trial fails, the caller sees it
            state, value = 'error', e
        finally:
            if job.lock is not None:
                job.lock.release()
        number = job.number
        if state == 'complete':
            self.study.tell(number, value)
            self.log(f'[search] trial {number} ({job.run_id}) complete: {value:.6g}')
        elif state == 'pruned':
            self.study.tell(number, state=optuna.trial.TrialState.PRUNED)
            self.log(f'[search] trial {number} ({job.run_id}) pruned{self._last_report(number)}')
        elif state == 'preempted':
            self.log(f'[search] trial {number} ({job.run_id}) preempted: left running, the '
                     f'next run of the search resumes it from its checkpoint')
            self._fail_all(value)
        else:
            self.study.tell(number, state=optuna.trial.TrialState.FAIL)
            self.log(f'[search] trial {number} ({job.run_id}) failed: '
                     f'{type(value).__name__}: {value}')
            if state == 'error':   # not caught: the search stops, as Optuna's optimize
                self._fail_all(value)
