"""One training run as a context manager: its config, run directory, status, results and sinks."""

from __future__ import annotations

import argparse
import glob
import json
import math
import numbers
import os
import platform
import re
import shlex
import shutil
import socket
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

from ..storage import Location, bucket_error, check_bucket, resolve
from ..storage.staging import clean_stale_staging, staging_prefix
from ..utils.files import write_json
from ..utils.status import PREEMPTED_EXIT_CODE, status_of_exit
from ..utils.text import close_matches_hint, typed_repr
from .config import (config_from_dict, config_to_dict, is_config_class,
                     is_config_instance, parse_config)
from .config.cli import class_summary
from .mlflow_mirror import mlflow_mirror_of
from .run_ids import default_run_id
from .run_files import (ConsoleCopy, GitProbe, Tee, cli_value, hparams_event_files, json_float,
                        package_versions, read_saved_config)
from .remote import RunRecordWriter, read_remote_run
from .sinks import RecordsSink, StoreSink, check_sinks, report_sink_error
from .store import ResultsStore, flatten_config

__all__ = ['Experiment', 'RunResults', 'current_experiment', 'PREEMPTED_EXIT_CODE',
           'CONFIG_FILE', 'RESULT_FILE', 'RUN_FILE', 'CONSOLE_FILE', 'add_run_plugin',
           'remove_run_plugin']

_C = TypeVar('_C')

CONFIG_FILE = 'config.json'
"""The config of a run, in its run directory (reloaded when the run is resumed)."""

RESULT_FILE = 'result.json'
"""The final results of a run, ``{name: value}``."""

RUN_FILE = 'run.json'
"""Facts about a run: id, name, status, host, command line, versions, git commit, starts."""

CONSOLE_FILE = 'console.log'
"""A copy of what the run printed to stdout and stderr (appended to on resume)."""

_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]*')

# the Experiments whose `with` block is open, innermost last, with the thread that opened it
_ACTIVE: list[tuple[int, Experiment[Any]]] = []


def current_experiment() -> Experiment[Any] | None:
    """The innermost :class:`Experiment` whose ``with`` block is open, or ``None``:
    the innermost opened by this thread, else the innermost of all (the trials of a
    threaded search each see their own)."""
    active = list(_ACTIVE)
    me = threading.get_ident()
    for thread, experiment in reversed(active):
        if thread == me:
            return experiment
    return active[-1][1] if active else None


# the run plugins of each thread (see `add_run_plugin`)
_PLUGINS = threading.local()


def add_run_plugin(plugin: Any) -> None:
    """Let `plugin` shape every :class:`Experiment` made from now on in this thread.

    What a hyperparameter-search trial installs (see :mod:`tfsnippet.search`),
    so that the user's own ``spt.Experiment(Config)`` becomes the trial's run.
    A plugin has three methods:

    * ``place(root, name) -> (root, name)``: where the run records (its root
      and run id) given what the Experiment was asked;
    * ``tags() -> dict``: more nested config entries to record with the run
      (the store, the sinks; not ``config.json``), those whose top-level key
      the config does not have;
    * ``loop_components(experiment) -> list``: more components for each
      TrainLoop made inside the block, after its recorder.

    Raises:
        TypeError: `plugin` lacks one of these methods.
    """
    missing = [m for m in ('place', 'tags', 'loop_components')
               if not callable(getattr(plugin, m, None))]
    if missing:
        raise TypeError(f'`plugin` must have the methods place, tags and loop_components, '
                        f'got {typed_repr(plugin)}, which lacks {", ".join(missing)}')
    plugins = getattr(_PLUGINS, 'stack', None)
    if plugins is None:
        plugins = _PLUGINS.stack = []
    plugins.append(plugin)


def remove_run_plugin(plugin: Any) -> None:
    """Remove `plugin` from this thread's run plugins (nothing if it is not there)."""
    plugins = getattr(_PLUGINS, 'stack', None) or []
    for i in range(len(plugins) - 1, -1, -1):
        if plugins[i] is plugin:
            del plugins[i]
            break


class RunResults(Mapping[str, float]):
    """The final results of an :class:`Experiment`'s run: read like a dict, written with
    :meth:`update` (each call records at once: store, ``result.json``, sinks)."""

    def __init__(self, experiment: Experiment[Any]) -> None:
        self._experiment = experiment
        self._values: dict[str, float] = {}

    def update(self, values: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        """Record final results ``{name: number}``; later values of a name replace earlier.

        Raises:
            TypeError: A name is not a str or a value is not a real number.
            RuntimeError: The Experiment's ``with`` block is not open.
        """
        if values is not None and not isinstance(values, Mapping):
            raise TypeError(f'`values` must be a mapping of names to numbers, got '
                            f'{typed_repr(values)}')
        merged = {**(values or {}), **kwargs}
        checked: dict[str, float] = {}
        for name, value in merged.items():
            if not isinstance(name, str) or not name:
                raise TypeError(f'Result names must be non-empty str, got {typed_repr(name)}')
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f'`results[{name!r}]` must be a real number, got '
                                f'{typed_repr(value)}')
            checked[name] = float(value)
        self._experiment._record_results(checked)
        self._values.update(checked)

    def __getitem__(self, name: str) -> float:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f'RunResults({self._values!r})'


class Experiment(Generic[_C]):
    """One training run: its config, a run directory, its status, results and sinks.

    ``with spt.Experiment(Config) as exp:`` parses the command line into the
    config (defaults, then ``--config FILE``, then ``--field value``, as
    :func:`~tfsnippet.parse_config`), makes the run directory
    ``<root>/<run_id>`` and records the run in the results store of `root`
    (``<root>/results.sqlite``, see :class:`~tfsnippet.ResultsStore`).  The
    run directory holds ``config.json``, ``run.json`` (id, name, status,
    host, command line, package versions, git commit and dirtiness when the
    script is in a git checkout, every start), ``console.log`` (a copy of
    stdout and stderr while the block is open, appended on resume),
    ``result.json`` (the final results), ``checkpoint/`` (the loop's
    checkpoints) and the TensorBoard HParams event file (the flattened
    config, the final results as ``results/<name>`` and the best validation
    values as ``best/<name>``; point TensorBoard at `root` and its HParams
    dashboard compares the runs)::

        class RunConfig(spt.Config):
            lr = 1e-3
            max_epoch = 10

        with spt.Experiment(RunConfig) as exp:
            with spt.TrainLoop(params, max_epoch=exp.config.max_epoch) as loop:
                ...                                      # recorded with no extra code
                loop.collect_results(test_acc=evaluate(test_data))
            exp.results.update({'n_params': count})     # more final results

    **A TrainLoop made inside the block** records into the run with no extra
    code (a :class:`~tfsnippet.scaffold.components.run_recorder.RunRecorder`
    is added to it): the statistics of each epoch as its epoch log line
    prints them (mean, std and count per metric), the best value of its
    validation metric and what ``loop.collect_results`` gets.  They are
    buffered and written at the end of an epoch when `flush_secs` have
    passed since the last write, and when the loop is left: never per step.
    The first such loop given no ``checkpoint_dir`` checkpoints into
    :attr:`checkpoint_dir` (the run directory; unless ``auto_checkpoint=False``).

    **Status**: ``'running'`` while the block is open (a background thread
    refreshes the heartbeat every `heartbeat_secs`, so a killed process
    shows as ``'stale'`` in queries once `stale_after` passed), then
    ``'completed'``, ``'failed'`` (an exception, ``KeyboardInterrupt``
    included, or a ``SystemExit`` with a non-zero code), ``'preempted'``
    (``TrainingPreempted``, i.e. a ``SystemExit`` with code 143, which the
    loop's checkpointer raises after saving on ``SIGTERM``) or ``'pruned'``
    (a hyperparameter search stopped the trial, see :mod:`tfsnippet.search`).  The exception
    is never swallowed.

    **Resuming**: the same run directory again (the same `name`, or
    ``--resume RUN_ID`` on the command line) resumes the run: its saved
    ``config.json`` is reloaded in place of the class's defaults, and the
    loop resumes from its checkpoints.  Options given on the command line
    are applied on top of the saved config (to extend ``--max_epoch``, say):
    the fields they change are printed and saved.  A saved config that no
    longer matches the config class is an error naming the fields.
    Nothing of the run's record (``config.json``, ``run.json``,
    ``console.log``, HParams, its row in the results store) changes before
    the resume is known to work: until the first TrainLoop made inside the
    block has restored its checkpoint (see :meth:`confirm_resume`), or
    something is recorded, or the block is left normally.  A resume that
    fails before leaves the run exactly as it was, and the exception gets a
    note naming the saved values of the fields the command line changed
    (``--hidden 64``), to pass instead.

    **A root on object storage** (``root='s3://bucket/runs'``, ``gs://...``;
    ``pip install "tfsnippet[s3]"`` or ``"tfsnippet[gcs]"``): the run's
    files are written into a local staging folder and uploaded whole under
    ``<root>/<run_id>/`` (``config.json`` and ``run.json`` at the start,
    ``result.json`` at each update, ``console.log`` at each heartbeat and
    everything at the end), and what a SQLite store would hold is written
    as the run's own numbered record objects, which
    :func:`tfsnippet.results.query` and ``python -m tfsnippet.results``
    read into a local index (see :mod:`tfsnippet.experiment.remote`: no
    object is shared between runs, so any number of jobs may write under
    one root at once).  :attr:`checkpoint_dir` is the run's URL.  A URL
    of an unknown protocol, or whose package is missing, a bucket that does
    not exist, and refused credentials are refused when the Experiment is
    made (on every worker): it reads the run's saved config there, to resume
    with it, which it cannot do, nor know whether there is one, without the
    bucket.

    **Several workers** (``TF_CONFIG`` or SLURM, see
    :func:`~tfsnippet.distributed.cluster_info`): only the chief writes
    files, the store and the sinks; other workers parse the same config and
    record nothing.  Every worker must record into the chief's run: without
    a `name` (or ``--resume``), the run id is the one the job's processes
    share (``TFSNIPPET_RUN_ID``, which ``python -m tfsnippet.launch`` sets,
    or the Kubernetes Indexed Job or SLURM job, see
    :func:`~tfsnippet.distributed.shared_run_id`), kept when the job
    restarts; where there is none (a ``TF_CONFIG`` alone, as on Vertex
    AI), a missing `name` is a ``ValueError``.  Every
    worker's first loop gets :attr:`checkpoint_dir`, so that all resume the
    same state; who saves there is the checkpointer's business.

    Args:
        config_or_class: A :class:`~tfsnippet.Config` subclass or dataclass
            (or an instance: updated in place, except on resume, where
            :attr:`config` is a new instance holding the saved values).
        root: The directory of the runs and their results store, or a URL
            (``s3://bucket/runs``) under which each run writes its objects.
        name: The run's id and directory name (letters, digits, ``._-``);
            by default the id the job's workers share, else (one process)
            a new id from the time and a random suffix.  An existing run of
            that name is resumed.
        args: The command-line arguments, ``sys.argv[1:]`` by default (in
            a notebook, pass ``[]``).  ``--resume RUN_ID`` is read from them too.
        sinks: More sinks to mirror the run to, each a
            :class:`~tfsnippet.scaffold.metrics.sinks.MetricSink` (with an
            optional ``start(run_id, name, config, info)``) or a
            :class:`~tfsnippet.experiment.sinks.RunSink`; they receive the
            same epoch statistics as the SQLite store, which is always
            written.  A sink's error is reported once and does not stop
            training (the sink is not called again in the run).
        mlflow: Also mirror the run to MLflow (``pip install "tfsnippet[mlflow]"``):
            a tracking URI (``'sqlite:///runs/mlflow.db'``, a server's
            ``'http://host:5000'``), ``True`` for MLflow's default URI
            (``MLFLOW_TRACKING_URI`` when it is set), or an
            :class:`~tfsnippet.experiment.mlflow_mirror.MlflowMirror` (to
            choose the MLflow experiment).  ``None``: no mirror, even when
            ``MLFLOW_TRACKING_URI`` is set.
        tee: Copy stdout and stderr into ``console.log``.
        hparams: Write TensorBoard HParams data into the run directory.
        auto_checkpoint: Give the first TrainLoop made inside the block
            :attr:`checkpoint_dir` as its ``checkpoint_dir``.
        flush_secs: The least seconds between two writes of buffered epochs
            (0: at the end of every epoch).
        heartbeat_secs: How often the heartbeat is refreshed while the block is open.
        stale_after: Seconds without a heartbeat after which the store shows
            a running run as ``'stale'``.
        is_chief: Whether this process writes; by default from
            :func:`~tfsnippet.distributed.cluster_info`.

    Raises:
        TypeError: An argument has the wrong type.
        ValueError: `name` is malformed or missing under several workers
            that share no run id, a saved config no longer matches the
            config class, or `root` is a URL of an unknown protocol, or whose
            bucket does not exist or refuses the credentials; when entered,
            `root` is not a writable directory.
        ~tfsnippet.storage.StorageUnavailableError: `root` is a URL whose
            package (``s3fs``, ``gcsfs``) is not installed.
        SystemExit: Parsing the command line failed (code 2, with the usage
            and the problem on standard error; also for a malformed
            ``--resume`` id or one that names no run of `root`) or ``--help``.
        ImportError: `mlflow` is given but MLflow is not installed.
    """

    def __init__(self, config_or_class: _C | type[_C], root: str | os.PathLike[str] = 'runs',
                 name: str | None = None, args: Sequence[str] | None = None, *,
                 sinks: Sequence[Any] | None = None, mlflow: str | bool | Any = None,
                 tee: bool = True, hparams: bool = True,
                 auto_checkpoint: bool = True, flush_secs: float = 1.,
                 heartbeat_secs: float = 60., stale_after: float = 600.,
                 is_chief: bool | None = None) -> None:
        if is_config_class(config_or_class):
            cls: type = config_or_class  # type: ignore[assignment]
        elif is_config_instance(config_or_class):
            cls = type(config_or_class)
        else:
            raise TypeError('`config_or_class` must be a Config subclass, a dataclass, or an '
                            f'instance of one, got {typed_repr(config_or_class)}')
        self._plugins: list[Any] = list(getattr(_PLUGINS, 'stack', None) or ())
        for plugin in self._plugins:   # a search trial: its root and run id
            root, name = plugin.place(root, name)
        if not isinstance(root, (str, os.PathLike)):
            raise TypeError(f'`root` must be a directory path or a URL, got {typed_repr(root)}')
        if not os.fspath(root):
            raise ValueError('`root` must be a directory path or a URL, got \'\'')
        # a URL of an unknown protocol, or whose package is missing, is refused here
        self._location: Location = resolve(root, argument='root')
        if name is not None:
            _check_run_name(name, '`name`')
        if args is not None and (isinstance(args, str) or not all(
                isinstance(a, str) for a in args)):
            raise TypeError(f'`args` must be a list of str, got {typed_repr(args)}')
        for arg, value in (('flush_secs', flush_secs), ('heartbeat_secs', heartbeat_secs),
                           ('stale_after', stale_after)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f'`{arg}` must be a number of seconds, got {typed_repr(value)}')
            if not (value >= 0 and math.isfinite(value)) or (arg == 'heartbeat_secs' and
                                                              value == 0):
                raise ValueError(f'`{arg}` must be {"> 0" if arg == "heartbeat_secs" else ">= 0"}'
                                 f', got {value!r}')
        self._sinks = check_sinks(sinks)
        mirror = mlflow_mirror_of(mlflow)
        if mirror is not None:
            self._sinks.append(mirror)
        self._tee_wanted = _check_flag(tee, 'tee')
        self._hparams_wanted = _check_flag(hparams, 'hparams')
        self._auto_checkpoint = _check_flag(auto_checkpoint, 'auto_checkpoint')
        self.flush_secs = float(flush_secs)
        self._heartbeat_secs = float(heartbeat_secs)
        self._stale_after = float(stale_after)
        if is_chief is None:
            from ..distributed import cluster_info
            is_chief = cluster_info().is_chief
        self._is_chief = _check_flag(is_chief, 'is_chief')
        self._root = self._location.url

        argv = list(sys.argv[1:] if args is None else args)
        parser = argparse.ArgumentParser(description=class_summary(cls), allow_abbrev=False)
        parser.add_argument('--resume', metavar='RUN_ID',
                            help=f'resume the run RUN_ID of the root directory {root!s} (its '
                                 f'saved config, then the options given here)')
        pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
        pre.add_argument('--resume')
        resume = pre.parse_known_args(argv)[0].resume
        if resume is not None:
            try:
                _check_run_name(resume, '`--resume`')
            except ValueError as e:   # an option error: usage and exit 2, as for the others
                parser.error(str(e))
            if name is not None and name != resume:
                raise ValueError(f'`name` is {name!r} but `--resume` asks for {resume!r}: '
                                 f'give one of them')
        self._run_id = resume or name or default_run_id()
        self._name = self._run_id
        self._run_location = self._location.join(self._run_id)
        self._run_dir = self._run_location.url
        # where the run's files are written: the run directory, or for a URL root a
        # local staging folder (made when the block is entered) uploaded from
        self._files_dir = self._run_dir if self._location.is_local else ''
        if self._location.is_local:
            saved_path = os.path.join(self._run_dir, CONFIG_FILE)
            saved_text = None   # read_saved_config reads the file
            found = os.path.isfile(saved_path)
        else:
            saved_path = f'{self._run_dir}/{CONFIG_FILE}'
            saved_text = self._read_remote_file(CONFIG_FILE)
            found = saved_text is not None
        if resume is not None and not found:
            close = _close_runs(self._location, resume)
            parser.error(f'`--resume`: no run {resume!r} in {self._root!r} (no '
                         f'{resume}/{CONFIG_FILE}){close}')
        self._resumed = found
        self._overrides: dict[str, tuple[Any, Any]] = {}
        if self._resumed:
            saved = read_saved_config(saved_path, cls, self._run_id, text=saved_text)
            config = parse_config(config_from_dict(cls, saved), argv, parser=parser)
            before, after = flatten_config(saved, check=False), flatten_config(
                config_to_dict(config), check=False)
            self._overrides = {k: (before.get(k), v) for k, v in after.items()
                               if before.get(k) != v}
        else:
            config = parse_config(config_or_class, argv, parser=parser)
        self._config: _C = config
        self._argv = argv
        self._results = RunResults(self)
        self._store: ResultsStore | None = None
        self._git = GitProbe(None)
        self._store_sink: StoreSink | RecordsSink | None = None
        self._multi: Any = None   # a MultiSink of the started sinks, while the block is open
        self._console: ConsoleCopy | None = None
        self._saved_streams: tuple[Any, Any] | None = None
        self._recording = _RunSink(self)
        self._status: str | None = None
        self._entered = False
        self._checkpoint_dir_taken = False
        self._heartbeat_stop = threading.Event()
        self._heartbeat_thread: threading.Thread | None = None
        self._lock = threading.RLock()
        self._info: dict[str, Any] = {}
        # a resumed run's start not recorded yet (see `confirm_resume`)
        self._start_pending = False
        # files handed to the sinks that keep artifacts when the run ends
        self._artifacts: list[str] = []

    # ---------------------------------------------------------------- properties
    @property
    def config(self) -> _C:
        """The config, filled from the command line (or reloaded on resume)."""
        return self._config

    @property
    def run_id(self) -> str:
        """The run's id: its `name`, ``--resume`` id, or a new one."""
        return self._run_id

    @property
    def root(self) -> str:
        """The directory of the runs and of their results store (absolute), or
        the root's URL (``s3://bucket/runs``)."""
        return self._root

    @property
    def run_dir(self) -> str:
        """The run's directory, ``<root>/<run_id>`` (a URL under a URL root)."""
        return self._run_dir

    @property
    def checkpoint_dir(self) -> str:
        """Where the run's TrainLoop checkpoints (its ``checkpoint/`` subdirectory):
        the run directory (under a URL root, the run's URL)."""
        return self._run_dir

    @property
    def resumed(self) -> bool:
        """Whether the run directory held a run already (its config was reloaded)."""
        return self._resumed

    @property
    def overrides(self) -> dict[str, tuple[Any, Any]]:
        """On resume, the fields the command line changed: ``{dotted: (saved, new)}``."""
        return dict(self._overrides)

    @property
    def is_chief(self) -> bool:
        """Whether this process writes the run (the chief, or the only process)."""
        return self._is_chief

    @property
    def results(self) -> RunResults:
        """The final results: ``exp.results.update({'test_acc': 0.97})`` records them."""
        return self._results

    @property
    def status(self) -> str | None:
        """``'running'`` inside the block, then the final status; ``None`` before."""
        return self._status

    @property
    def active(self) -> bool:
        """Whether the ``with`` block is open (what is recorded goes somewhere)."""
        return self._status == 'running'

    @property
    def sink(self) -> Any:
        """The run as one :class:`~tfsnippet.scaffold.metrics.sinks.MetricSink`:
        what a loop's :class:`~tfsnippet.scaffold.components.run_recorder.RunRecorder`
        writes to (the store, MLflow, HParams and `sinks`; nothing outside
        the block or on a worker that is not the chief; ``close`` does nothing:
        the block's end closes the run)."""
        return self._recording

    @property
    def store(self) -> ResultsStore | None:
        """The results store while the block is open (the chief only, under a
        local root), else ``None``: under a URL root the run writes its records
        as objects, read back by :func:`tfsnippet.results.query`."""
        return self._store

    def __repr__(self) -> str:
        return f'Experiment({self._run_id!r}, root={self._root!r})'

    # ---------------------------------------------------------------- enter / exit
    def __enter__(self) -> Experiment[_C]:
        if self._entered:
            raise RuntimeError('An Experiment can be entered only once; make a new one to '
                               'resume the run')
        self._entered = True
        if self._is_chief:
            self._start()
        self._status = 'running'
        _ACTIVE.append((threading.get_ident(), self))
        from ..scaffold.loop_context import push_loop_context
        push_loop_context(self)
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        mine = [entry for entry in _ACTIVE if entry[1] is self]
        if mine:
            _ACTIVE.remove(mine[0])
            from ..scaffold.loop_context import remove_loop_context
            remove_loop_context(self)
        status = status_of_exit(exc)
        self._status = status
        if not self._is_chief:
            return
        if self._start_pending and status != 'completed':
            self._abandon(exc)   # the resume did not work: the run is left as it was
            return
        try:
            self._confirm_start()
        except BaseException as e:
            self._finish('failed', e)
            raise
        self._finish(status, exc)

    def confirm_resume(self) -> None:
        """Record a resumed run's start now: its config, ``run.json``, console
        copy, sinks and HParams (nothing of a new run waits for this).

        A TrainLoop made inside the block calls it once it has restored its
        checkpoint; recording anything and leaving the block normally call it
        too.  Until then a resumed run's record is untouched, so a resume that
        fails (a checkpoint that cannot take a changed field) leaves it as it was.
        """
        if self._start_pending and self.active:
            self._confirm_start()

    def _confirm_start(self) -> None:
        if self._start_pending:
            self._start_pending = False
            with self._lock:
                self._record_start()

    def _abandon(self, exc: BaseException | None) -> None:
        """Close what a resumed run that failed before its start was recorded opened."""
        self._start_pending = False
        self._heartbeat_stop.set()
        if self._heartbeat_thread is not None:
            self._heartbeat_thread.join()
            self._heartbeat_thread = None
        self._stop_tee()
        if self._store is not None:
            self._store.close()
            self._store = None
        self._drop_staging()
        if isinstance(exc, Exception):
            instead = ' '.join(f'--{k} {cli_value(old)}' for k, (old, _) in
                               self._overrides.items())
            note = (f'The resume of run {self._run_id!r} failed before the loop restored its '
                    f'checkpoint: the run is left as it was (nothing recorded).')
            if instead:
                changed = ', '.join(f'{k}: {old!r} -> {new!r}'
                                    for k, (old, new) in self._overrides.items())
                note += (f' The command line changed {changed}; if the checkpoint cannot take '
                         f'that, resume with the saved values ({instead}) or without these '
                         f'options, or start a new run (another name) for the new values.')
            add_note = getattr(exc, 'add_note', None)   # Python 3.11+
            if callable(add_note):
                add_note(note)
            else:
                print(note, file=sys.stderr)

    def _start(self) -> None:
        script = sys.argv[0] if sys.argv and sys.argv[0] else ''
        # git looks at the script's checkout while the store and directory are opened
        self._git = GitProbe.of(os.path.dirname(os.path.abspath(script)) if script else os.getcwd())
        try:
            self._open_run_files()
        except BaseException:
            self._git.result()   # no git process left behind
            raise
        try:
            self._info = self._collect_info()
            if self._tee_wanted:
                self._start_tee()
            if self._resumed:
                changed = ''.join(f'; {k}: {old!r} -> {new!r}'
                                  for k, (old, new) in self._overrides.items())
                print(f'Resuming run {self._run_id!r} in {self._run_dir}'
                      f'{" with command-line overrides" + changed if changed else ""}')
                self._start_pending = True   # recorded once the resume works
            else:
                self._record_start()
        except BaseException:
            self._finish('failed', None)
            raise
        self._heartbeat_thread = threading.Thread(
            target=self._heartbeat_loop, name=f'tfsnippet-heartbeat-{self._run_id}', daemon=True)
        self._heartbeat_thread.start()

    def _open_run_files(self) -> None:
        """Open the results store and make the run directory (a local root), or the
        staging folder of a URL root's run."""
        if not self._location.is_local:
            self._start_staging()
            return
        self._store = ResultsStore(self._root, stale_after=self._stale_after)
        try:
            os.makedirs(self._run_dir, exist_ok=True)
        except OSError as e:
            self._store.close()
            self._store = None
            raise ValueError(f'`root` is not a writable directory: cannot create the run '
                             f'directory {self._run_dir!r} ({e.strerror or e})') from e

    def _record_start(self) -> None:
        """Write the run's config, run.json and console copy; start the sinks."""
        from ..scaffold.metrics.sinks import MultiSink
        config = config_to_dict(self._config)
        write_json(os.path.join(self._files_dir, CONFIG_FILE), config)
        write_json(os.path.join(self._files_dir, RUN_FILE), self._info)
        self._upload(CONFIG_FILE, RUN_FILE)
        if self._console is not None:
            self._console.open(os.path.join(self._files_dir, CONSOLE_FILE))
        if self._store is not None:
            self._store_sink = StoreSink(self._store)
        else:
            self._store_sink = RecordsSink(RunRecordWriter(self._run_location))
        sinks = [self._store_sink, *self._sinks]
        if self._hparams_wanted:
            sinks.append(self._hparams_sink())
        info = {k: v for k, v in self._info.items() if k != 'starts'}
        for plugin in self._plugins:   # a search trial's study and number
            config.update({k: v for k, v in plugin.tags().items() if k not in config})
        self._multi = MultiSink([sink for sink in sinks if self._start_sink(
            sink, self._run_id, self._name, config, info)])

    def _hparams_sink(self) -> Any:
        """The HParams sink of this start; on resume, the earlier starts' HParams files
        give way to it (TensorBoard keeps the first session start of a run directory:
        `--max_epoch 6` then shows 6), and it repeats their best values and results."""
        from .hparams import HParamsSink
        sink = HParamsSink(self._files_dir)
        if self._resumed:
            for path in hparams_event_files(self._files_dir):
                try:
                    os.remove(path)
                except OSError:
                    pass
                if not self._location.is_local:   # its uploaded copy goes too
                    try:
                        self._run_location.fs.rm_file(
                            self._run_location.join(os.path.basename(path)).path)
                    except OSError:
                        pass
            if self._store is not None:
                try:
                    row = self._store.get_run(self._run_id)
                except (KeyError, ValueError):
                    return sink
            else:
                found = read_remote_run(self._run_location, self._run_id)
                if found is None:
                    return sink
                row = found
            sink.carry_over(row.best, row.results, row.step or 0)
        return sink

    def _finish(self, status: str, exc: BaseException | None) -> None:
        self._heartbeat_stop.set()
        if self._heartbeat_thread is not None:
            self._heartbeat_thread.join()
            self._heartbeat_thread = None
        try:
            if self._multi is not None:
                with self._lock:
                    if self._console is not None:
                        self._console.flush()
                    artifacts = self._artifact_paths()
                    for sink in self._multi.live if artifacts else ():
                        if callable(getattr(sink, 'log_artifacts', None)):
                            self._multi.call(sink, 'log_artifacts', artifacts)
                    self._multi.close(status)
            if self._info:
                self._info.update(status=status, ended=time.time())
                if exc is not None and status == 'failed':
                    self._info['error'] = f'{type(exc).__name__}: {exc}'
                try:
                    write_json(os.path.join(self._files_dir, RUN_FILE), self._info)
                except OSError as e:   # never hide the exception leaving the block
                    warnings.warn(f'Could not write the final status of run {self._run_id!r} '
                                  f'into {RUN_FILE}: {e}', RuntimeWarning, stacklevel=3)
        finally:
            self._multi = None
            self._stop_tee()
            if self._store is not None:
                self._store.close()
                self._store = None
            if self._info and not self._location.is_local:
                try:   # every file of the run, whole (an object store cannot append)
                    self._upload(*sorted(os.listdir(self._files_dir)))
                except OSError as e:   # never hide the exception leaving the block
                    warnings.warn(f'Could not upload the files of run {self._run_id!r} to '
                                  f'{self._run_dir}: {e}', RuntimeWarning, stacklevel=3)
            self._drop_staging()

    # ---------------------------------------------------------------- recording
    def _start_sink(self, sink: Any, *args: Any) -> bool:
        """Call `sink.start(*args)` if it has one; on an error report it (the
        sink is not used in this run)."""
        start = getattr(sink, 'start', None)
        if not callable(start):
            return True
        try:
            start(*args)
            return True
        except Exception as e:  # noqa: BLE001 - a sink never stops training; reported
            report_sink_error(sink, 'start', e)
            return False

    def _recording_sinks(self) -> Any:
        """The MultiSink written to, or None (not the chief, or the block is not open)."""
        return self._multi if self._is_chief and self.active else None

    def log_epochs(self, epochs: Sequence[tuple[int, int, Mapping[str, Mapping[str, Any]]]],
                   best: Mapping[str, float] | None = None) -> None:
        """Record epochs and best values now, through every sink.

        What a loop's recorder does through :attr:`sink`; each epoch is
        the statistics of scope ``'epoch'``, then the sinks are flushed.

        Args:
            epochs: ``(step, epoch, {name: {'mean': m, 'std': s, 'count': n}})``
                triples, oldest first.
            best: The best validation values so far, if they changed.
        """
        if self._is_chief and self.active:
            self._confirm_start()
        sink = self._recording
        for step, epoch, stats in epochs:
            sink.write_stats('epoch', step, epoch, stats)
        if best:
            sink.write_best(dict(best), max((e[0] for e in epochs), default=0))
        sink.flush()

    def _record_results(self, values: dict[str, float]) -> None:
        if not self.active:
            raise RuntimeError('`results.update()` must be called inside the Experiment\'s '
                               '`with` block')
        if not self._is_chief or not values:
            return
        self._confirm_start()
        with self._lock:
            if self._multi is not None:
                self._multi.write_results(dict(values))
            merged = {**self._results, **values}
            path = os.path.join(self._files_dir, RESULT_FILE)
            if self._resumed and not self._results and os.path.isfile(path):
                try:
                    with open(path, encoding='utf-8') as f:
                        merged = {**json.load(f), **merged}
                except (OSError, ValueError):
                    pass
            write_json(path, {k: json_float(v) for k, v in merged.items()})
            self._upload(RESULT_FILE)

    def add_artifact(self, path: str) -> None:
        """Hand the file or directory `path` to the sinks that keep artifacts (MLflow)
        when the run ends, if it exists then; ``config.json``, ``console.log`` and
        ``result.json`` always are.  A loop's exported best weights are added by
        its recorder."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f'`path` must be a file path, got {typed_repr(path)}')
        path = os.path.abspath(os.fspath(path))
        if path not in self._artifacts:
            self._artifacts.append(path)

    def _artifact_paths(self) -> list[str]:
        out = [os.path.join(self._files_dir, f) for f in (CONFIG_FILE, CONSOLE_FILE, RESULT_FILE)]
        for path in self._artifacts:
            out.append(path)
            stem = path[:-len('.weights.h5')] if path.endswith('.weights.h5') else None
            if stem is not None:   # the files of a dict of models: `<stem>-<key>.weights.h5`
                out += sorted(glob.glob(glob.escape(stem) + '-*.weights.h5'))
        return [p for p in dict.fromkeys(out) if os.path.exists(p)]

    def heartbeat(self) -> None:
        """Show the store the run is alive (a background thread does it regularly)."""
        with self._lock:
            multi, store_sink = self._multi, self._store_sink
            if multi is not None and store_sink is not None:
                multi.call(store_sink, 'heartbeat')
                if not self._location.is_local and self._console is not None:
                    self._console.flush()
                    try:   # the console so far: a killed run keeps it up to here
                        self._upload(CONSOLE_FILE)
                    except OSError:
                        pass

    def _heartbeat_loop(self) -> None:
        while not self._heartbeat_stop.wait(self._heartbeat_secs):
            self.heartbeat()

    def loop_components(self) -> list[Any]:
        """What a TrainLoop made inside the block gets (as a loop context
        provider): a :class:`~tfsnippet.scaffold.components.run_recorder.RunRecorder`,
        and those of the run plugins (a search trial's reporter, see :func:`add_run_plugin`)."""
        from ..scaffold.components.run_recorder import RunRecorder
        return [RunRecorder(self), *(c for plugin in self._plugins
                                     for c in plugin.loop_components(self))]

    def claim_checkpoint_dir(self, take: bool = True) -> str | None:
        """The checkpoint directory for the first TrainLoop made inside the block
        (``None`` for later ones, or with ``auto_checkpoint=False``); ``take=False``
        only tells it, for a loop that may still fail to be made."""
        if not self._auto_checkpoint or self._checkpoint_dir_taken:
            return None
        self._checkpoint_dir_taken = take
        return self.checkpoint_dir

    # ---------------------------------------------------------------- files
    def _collect_info(self) -> dict[str, Any]:
        previous: list[Any] = []
        path = os.path.join(self._files_dir, RUN_FILE)
        if self._resumed and os.path.isfile(path):
            try:
                with open(path, encoding='utf-8') as f:
                    previous = list(json.load(f).get('starts', []))
            except (OSError, ValueError, AttributeError):
                previous = []
        script = sys.argv[0] if sys.argv and sys.argv[0] else ''
        # the command that ran (options the script reads itself, `--root`, included);
        # `argv` below holds what the config was parsed from
        command = shlex.join([sys.executable, *sys.argv] if script else [sys.executable])
        now = time.time()
        start = {'time': now, 'host': socket.gethostname(), 'pid': os.getpid(),
                 'argv': list(self._argv), 'overrides': {k: list(v) for k, v in
                                                         self._overrides.items()}}
        info = {
            'run_id': self._run_id, 'name': self._name, 'status': 'running',
            'run_dir': self._run_dir, 'host': socket.gethostname(), 'pid': os.getpid(),
            'argv': list(self._argv), 'command': command, 'cwd': os.getcwd(),
            'python': platform.python_version(), 'platform': platform.platform(),
            'versions': package_versions(), 'git_commit': None, 'git_dirty': None,
            'resumed': self._resumed, 'started': now, 'starts': [*previous, start],
        }
        info.update(self._git.result())   # last: git had the time of the rest
        return info

    def _read_remote_file(self, name: str) -> str | None:
        """The text of the object `name` of a URL root's run, or ``None`` if there is none."""
        try:
            data: bytes = self._run_location.fs.cat_file(self._run_location.join(name).path)
        except FileNotFoundError:
            check_bucket(self._location, 'root')   # no such object, or no such bucket?
            return None
        except OSError as e:   # refused credentials: the same message as a loop's
            raise bucket_error(self._location, 'root', e) from e
        return data.decode('utf-8', errors='replace')

    def _start_staging(self) -> None:
        """Make the local folder of a URL root's run files; on resume, bring down
        the files that are extended (run.json, result.json, console.log, HParams)."""
        clean_stale_staging()   # what killed attempts left in the temporary directory
        self._files_dir = tempfile.mkdtemp(prefix=staging_prefix('run', self._run_id))
        if not self._resumed:
            return
        fs = self._run_location.fs
        try:
            names = [p.rstrip('/').rsplit('/', 1)[-1]
                     for p in fs.ls(self._run_location.path, detail=False)]
        except FileNotFoundError:
            names = []
        for name in names:
            if name in (RUN_FILE, RESULT_FILE, CONSOLE_FILE) or name.startswith(
                    'events.out.tfevents.'):
                fs.get_file(self._run_location.join(name).path,
                            os.path.join(self._files_dir, name))

    def _upload(self, *names: str) -> None:
        """Upload the staged files `names` whole to the run's URL (nothing for a local root)."""
        if self._location.is_local or not self._files_dir:
            return
        for name in names:
            path = os.path.join(self._files_dir, name)
            if os.path.isfile(path):
                self._run_location.fs.put_file(path, self._run_location.join(name).path)

    def _drop_staging(self) -> None:
        if not self._location.is_local and self._files_dir:
            shutil.rmtree(self._files_dir, ignore_errors=True)
            self._files_dir = ''

    def _start_tee(self) -> None:
        self._console = ConsoleCopy()
        self._saved_streams = (sys.stdout, sys.stderr)
        sys.stdout = Tee(sys.stdout, self._console)
        sys.stderr = Tee(sys.stderr, self._console)

    def _stop_tee(self) -> None:
        if self._saved_streams is not None:
            sys.stdout, sys.stderr = self._saved_streams
            self._saved_streams = None
        if self._console is not None:
            self._console.close()
            self._console = None


class _RunSink:
    """The run as one MetricSink (``Experiment.sink``): writes go to the
    Experiment's sinks under its lock, while its block is open, on the chief."""

    def __init__(self, experiment: Experiment[Any]) -> None:
        self._experiment = experiment

    def write_stats(self, scope: str, step: int, epoch: int,
                    stats: Mapping[str, Mapping[str, Any]]) -> None:
        exp = self._experiment
        with exp._lock:
            multi = exp._recording_sinks()
            if multi is not None:
                multi.write_stats(scope, step, epoch, stats)

    def write_best(self, values: Mapping[str, float], step: int) -> None:
        exp = self._experiment
        with exp._lock:
            multi = exp._recording_sinks()
            if multi is not None:
                multi.write_best(values, step)

    def write_results(self, values: Mapping[str, float]) -> None:
        if self._experiment.active:
            self._experiment.results.update(values)

    def flush(self) -> None:
        exp = self._experiment
        with exp._lock:
            multi = exp._recording_sinks()
            if multi is not None:
                multi.flush()

    def resumed(self, step: int, epoch: int) -> None:
        """Tell the sinks that the epochs from `epoch` on are replayed (the store
        forgets its rows of them; see ``MetricSink.resumed``)."""
        exp = self._experiment
        with exp._lock:
            multi = exp._recording_sinks()
            if multi is not None:
                multi.resumed(step, epoch)

    def close(self, status: str) -> None:
        """Nothing: the Experiment closes its sinks when its block is left."""

    def __repr__(self) -> str:
        return f'{self._experiment!r}.sink'


# -------------------------------------------------------------------- helpers
def _check_run_name(name: Any, what: str) -> None:
    if not isinstance(name, str):
        raise TypeError(f'{what} must be a str, got {typed_repr(name)}')
    if not _NAME.fullmatch(name):
        raise ValueError(f'{what} must be a run id of letters, digits, ".", "_" and "-" '
                         f'(not starting with "." or "-"), got {typed_repr(name)}')


def _check_flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f'`{name}` must be True or False, got {typed_repr(value)}')
    return value


def _close_runs(root: Location, run_id: str) -> str:
    try:
        if root.is_local:
            runs = [d for d in os.listdir(root.path)
                    if os.path.isfile(os.path.join(root.path, d, CONFIG_FILE))]
        else:
            runs = [p.rstrip('/').rsplit('/', 1)[-1]
                    for p in root.fs.ls(root.path, detail=False)]
    except OSError:
        return ''
    return close_matches_hint(run_id, runs)

