"""A run sink mirroring each run (config, epoch metrics, best values, results) to MLflow."""

from __future__ import annotations

import importlib
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from ..utils.files import write_json
from ..utils.status import RUN_STATUSES
from ..utils.text import typed_repr
from .store import flatten_config

try:
    import fcntl
except ImportError:   # not on POSIX: no lock
    fcntl = None  # type: ignore[assignment]

__all__ = ['MlflowMirror', 'mlflow_mirror_of', 'INSTALL_HINT', 'RUN_ID_TAG', 'STATUS_TAG',
           'CHANGED_TAG_PREFIX', 'MLFLOW_STATUS', 'RUN_FILE']

INSTALL_HINT = 'pip install "tfsnippet[mlflow]"'
"""How to install the optional dependency of this module."""

RUN_ID_TAG = 'tfsnippet.run_id'
"""The tag holding the tfsnippet run id of an MLflow run; a resumed run is found by it."""

STATUS_TAG = 'tfsnippet.status'
"""The tag holding the tfsnippet status of an MLflow run (``'preempted'`` is not MLflow's)."""

CHANGED_TAG_PREFIX = 'tfsnippet.changed.'
"""A param whose value changed when the run resumed keeps its first value; the tag
``tfsnippet.changed.<param>`` holds the latest."""

RUN_FILE = 'mlflow_run.json'
"""Written into the run directory: the tracking URI, experiment and run ids of the MLflow run."""

MLFLOW_STATUS = {'completed': 'FINISHED', 'failed': 'FAILED', 'preempted': 'KILLED',
                 'pruned': 'KILLED'}
"""The MLflow status given to a run for each final tfsnippet status."""

_BEST_PREFIX = 'best_'
_EPOCH_METRIC = 'epoch'
_MAX_PARAMS_TAGS = 100     # per `log_batch` request (MLflow's limit)
_MAX_METRICS = 1000
_MAX_PARAM_LENGTH = 6000
_MAX_TAG_LENGTH = 8000


def import_mlflow(what: str = 'MlflowMirror') -> ModuleType:
    """Import MLflow, or fail with an error that says how to install it.

    Args:
        what: The name that needs MLflow, for the message.

    Raises:
        ImportError: MLflow is not installed.
    """
    try:
        return importlib.import_module('mlflow')
    except ImportError as e:
        raise ImportError(f'{what} needs MLflow, which is not installed: {INSTALL_HINT}') from e


def _param_value(value: Any) -> str:
    """A config value as an MLflow param (a string, as `search_runs` compares it)."""
    if isinstance(value, (list, tuple)):
        text = json.dumps(list(value))
    else:
        text = str(value)
    return text[:_MAX_PARAM_LENGTH]


def _tag_value(value: Any) -> str:
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, sort_keys=True, default=str)
        except (TypeError, ValueError):
            text = repr(value)
    return text[:_MAX_TAG_LENGTH]


def _chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


class MlflowMirror:
    """Mirror the runs of an `Experiment` to MLflow tracking.

    A :class:`~tfsnippet.scaffold.metrics.sinks.MetricSink`: the experiment
    calls :meth:`start` when a run starts or resumes, :meth:`write_stats`
    with the statistics of each epoch and :meth:`write_best` with new best
    values (both kept until :meth:`flush`, which sends them in one
    request), :meth:`write_results` with final results, and :meth:`close`
    with the final status.  The earlier methods (:meth:`log_epoch`,
    :meth:`log_epochs`, :meth:`log_best`, :meth:`log_results`,
    :meth:`finish`) send at once.  What MLflow gets, for one
    tfsnippet run, in one MLflow run of the experiment `experiment_name`:

    * the run's name as the MLflow run name, and the tags
      ``tfsnippet.run_id`` (the tfsnippet run id) and ``tfsnippet.status``,
      plus one ``tfsnippet.<key>`` tag per item of the run's `info` (host,
      command line, versions, ...; ``None`` values left out), and the git
      commit as ``mlflow.source.git.commit``;
    * the config flattened to dotted keys as params
      (``{'optimizer': {'lr': 0.001}}`` is the param ``optimizer.lr``, the
      string ``'0.001'``);
    * each epoch metric as a series, at the loop's global step, and the
      series ``epoch`` (the epoch number at that step);
    * each best value as the metric ``best_<name>``, each final result as the
      metric ``<name>``, both at the last step logged;
    * the status: ``'completed'``, ``'failed'`` and ``'preempted'`` end the
      MLflow run as ``FINISHED``, ``FAILED`` and ``KILLED``.

    MLflow is called once per flush of an Experiment (its epochs and best
    values in one ``log_batch`` request), and once per results update (the
    means of the epoch statistics are logged, as before); never per training
    step, and only from these methods: the sink keeps no thread.

    With a local SQLite store, :meth:`start` holds the lock file
    ``<database>.lock``, so that runs starting together (a sweep) do not
    race to create the store.

    When the run's `info` names an existing ``run_dir`` (an Experiment's
    does), the file ``mlflow_run.json`` there gives the tracking URI and the
    ids of the MLflow experiment and run.

    A resumed run (the same tfsnippet run id) continues the same MLflow run,
    found by its ``tfsnippet.run_id`` tag: its status goes back to
    ``RUNNING``, params already there are not logged again (MLflow cannot
    change one: a value changed on resume, e.g. a larger ``max_epoch``, goes
    to the tag ``tfsnippet.changed.<param>``), and epochs whose
    step was logged before (replayed after resuming from an older
    checkpoint) are skipped, since MLflow cannot replace a logged value.

    Args:
        tracking_uri: Where MLflow keeps its runs: a local SQLite file,
            ``'sqlite:///path/to/mlflow.db'`` (its folder is created), or a
            tracking server, ``'http://host:5000'``.  A ``pathlib.Path`` is
            taken as the path of a SQLite file.  ``None``: MLflow's own
            default (the environment variable ``MLFLOW_TRACKING_URI`` when
            it is set).
        experiment_name: The MLflow experiment of the runs, created if needed.
        tags: More tags for every run mirrored.
        clock: Returns the time in seconds since the epoch (the timestamps
            of the metrics).

    Raises:
        ImportError: MLflow is not installed (``pip install "tfsnippet[mlflow]"``).
        TypeError: An argument of the wrong type.
        ValueError: An empty `experiment_name`.

    Example:
        >>> import tempfile, mlflow
        >>> from tfsnippet.experiment.mlflow_mirror import MlflowMirror
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     uri = f'sqlite:///{tmp}/mlflow.db'
        ...     mirror = MlflowMirror(uri, 'digits')
        ...     mirror.start('r1', 'baseline', {'optimizer': {'lr': 0.01}}, {})
        ...     mirror.log_epoch(step=34, epoch=1, metrics={'valid_loss': 0.5})
        ...     mirror.log_results({'test_acc': 0.95})
        ...     mirror.finish('completed')
        ...     runs = mlflow.MlflowClient(uri).search_runs(
        ...         [mirror.experiment_id], "params.`optimizer.lr` = '0.01'")
        >>> [(r.info.run_name, r.info.status, r.data.metrics['test_acc']) for r in runs]
        [('baseline', 'FINISHED', 0.95)]
    """

    def __init__(self, tracking_uri: str | os.PathLike[str] | None = None,
                 experiment_name: str = 'tfsnippet',
                 *, tags: Mapping[str, Any] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        if tracking_uri is not None and not isinstance(tracking_uri, (str, os.PathLike)):
            raise TypeError(f'`tracking_uri` must be a str (e.g. "sqlite:///mlflow.db") or '
                            f'None, got {typed_repr(tracking_uri)}')
        if not isinstance(experiment_name, str):
            raise TypeError(f'`experiment_name` must be a str, got {typed_repr(experiment_name)}')
        if not experiment_name.strip():
            raise ValueError(f'`experiment_name` must not be empty, got {experiment_name!r}')
        if tags is not None and not isinstance(tags, Mapping):
            raise TypeError(f'`tags` must be a mapping of str to values, got {typed_repr(tags)}')
        if not callable(clock):
            raise TypeError(f'`clock` must be a callable returning seconds, '
                            f'got {typed_repr(clock)}')
        self._mlflow = import_mlflow()
        if isinstance(tracking_uri, os.PathLike):   # a SQLite file
            tracking_uri = f'sqlite:///{os.path.abspath(os.fspath(tracking_uri))}'
        self._tracking_uri = tracking_uri
        self._experiment_name = experiment_name
        self._tags = {str(k): _tag_value(v) for k, v in (tags or {}).items()}
        self._clock = clock
        self._client: Any = None
        self._experiment_id: str | None = None
        self._run_id: str | None = None          # MLflow's
        self._last_step = -1                     # the last step logged (or found on resume)
        self._resumed = False
        # kept by the MetricSink methods until `flush`
        self._epochs: list[tuple[int, int, Mapping[str, float]]] = []
        self._best: dict[str, float] = {}

    # ----------------------------------------------------------- properties
    @property
    def tracking_uri(self) -> str | None:
        """The tracking URI given, or ``None`` for MLflow's default."""
        return self._tracking_uri

    @property
    def experiment_name(self) -> str:
        """The MLflow experiment the runs go to."""
        return self._experiment_name

    @property
    def experiment_id(self) -> str | None:
        """The id of that MLflow experiment, known once a run has started."""
        return self._experiment_id

    @property
    def mlflow_run_id(self) -> str | None:
        """The MLflow run id of the current (or last) run, or ``None`` before :meth:`start`."""
        return self._run_id

    @property
    def resumed(self) -> bool:
        """Whether :meth:`start` continued an MLflow run that was already there."""
        return self._resumed

    @property
    def client(self) -> Any:
        """The ``mlflow.MlflowClient`` used, created on first use."""
        if self._client is None:
            self._make_sqlite_folder()
            self._client = self._mlflow.MlflowClient(tracking_uri=self._tracking_uri)
        return self._client

    def __repr__(self) -> str:
        return f'MlflowMirror({self._tracking_uri!r}, {self._experiment_name!r})'

    # -------------------------------------------------------------- helpers
    def _sqlite_path(self) -> str | None:
        """The database file of a local SQLite tracking store, else ``None``."""
        uri = self._tracking_uri or str(self._mlflow.get_tracking_uri())
        if not uri.startswith('sqlite:///'):
            return None
        path = uri[len('sqlite:///'):].split('?', 1)[0]
        return path if path and path != ':memory:' else None

    def _make_sqlite_folder(self) -> None:
        path = self._sqlite_path()
        if path is not None and os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)

    @contextmanager
    def _store_lock(self) -> Iterator[None]:
        """Hold a lock file next to a SQLite tracking store (on POSIX).

        MLflow creates a new SQLite store with migrations that fail when
        several processes run them at once: runs of a sweep that start
        together take turns to start.
        """
        path = self._sqlite_path()
        if path is None or fcntl is None:
            yield
            return
        self._make_sqlite_folder()
        with open(f'{path}.lock', 'a', encoding='utf-8') as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    def _get_experiment_id(self) -> str:
        client = self.client
        found = client.get_experiment_by_name(self._experiment_name)
        if found is None:
            try:
                return str(client.create_experiment(self._experiment_name,
                                                    _artifact_location(client.tracking_uri)))
            except self._mlflow.exceptions.MlflowException:
                # another process created it first
                found = client.get_experiment_by_name(self._experiment_name)
                if found is None:
                    raise
        if found.lifecycle_stage == 'deleted':
            raise ValueError(f'`experiment_name`: the MLflow experiment '
                             f'{self._experiment_name!r} is deleted; restore it or choose '
                             f'another name')
        return str(found.experiment_id)

    def _find_run(self, run_id: str) -> Any:
        quoted = run_id.replace("'", "\\'")
        runs = self.client.search_runs(
            [self._experiment_id], f"tags.`{RUN_ID_TAG}` = '{quoted}'", max_results=1,
            order_by=['attributes.start_time DESC'])
        return runs[0] if runs else None

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _require_run(self, method: str) -> str:
        if self._run_id is None:
            raise RuntimeError(f'`MlflowMirror.{method}` called before `start`')
        return self._run_id

    def _log(self, metrics: Sequence[Any] = (), params: Sequence[Any] = (),
             tags: Sequence[Any] = ()) -> None:
        """Send everything in as few ``log_batch`` requests as MLflow's limits allow."""
        run_id = self._require_run('log')
        metrics, params, tags = list(metrics), list(params), list(tags)
        while metrics or params or tags:
            batch_params = params[:_MAX_PARAMS_TAGS]
            batch_tags = tags[:_MAX_PARAMS_TAGS - len(batch_params)]
            batch_metrics = metrics[:_MAX_METRICS - len(batch_params) - len(batch_tags)]
            self.client.log_batch(run_id, metrics=batch_metrics, params=batch_params,
                                  tags=batch_tags)
            del params[:len(batch_params)], tags[:len(batch_tags)], metrics[:len(batch_metrics)]

    def _metrics(self, values: Mapping[str, float], prefix: str, step: int,
                 what: str) -> list[Any]:
        if not isinstance(values, Mapping):
            raise TypeError(f'`{what}` must be a mapping of metric names to numbers, '
                            f'got {typed_repr(values)}')
        metric = self._mlflow.entities.Metric
        now = self._now_ms()
        out = []
        for name, value in values.items():
            try:
                number = float(value)
            except (TypeError, ValueError) as e:
                raise TypeError(f'`{what}`[{name!r}] must be a number, got '
                                f'{typed_repr(value)}') from e
            out.append(metric(f'{prefix}{name}', number, now, step))
        return out

    # ----------------------------------------------------------- the sink
    def start(self, run_id: str, name: str, config: Mapping[str, Any],
              info: Mapping[str, Any]) -> None:
        """Create the MLflow run of a tfsnippet run, or continue it when it exists.

        Args:
            run_id: The tfsnippet run id (the tag ``tfsnippet.run_id``).
            name: The run's name (the MLflow run name).
            config: The run's config (nested mappings): the params.
            info: Facts about the run (host, command line, git commit, ...):
                one tag ``tfsnippet.<key>`` each.
        """
        for arg, value in (('run_id', run_id), ('name', name)):
            if not isinstance(value, str) or not value:
                raise TypeError(f'`{arg}` must be a non-empty str, got {typed_repr(value)}')
        for arg, mapping in (('config', config), ('info', info)):
            if not isinstance(mapping, Mapping):
                raise TypeError(f'`{arg}` must be a mapping, got {typed_repr(mapping)}')
        with self._store_lock():
            self._start(run_id, name, config, info)

    def _start(self, run_id: str, name: str, config: Mapping[str, Any],
               info: Mapping[str, Any]) -> None:
        entities = self._mlflow.entities
        self._experiment_id = self._get_experiment_id()
        found = self._find_run(run_id)
        params = {key: _param_value(value)
                  for key, value in flatten_config(config, check=False).items()}
        tags = {**self._tags,
                **{f'tfsnippet.{key}': _tag_value(value) for key, value in info.items()
                   if value is not None},
                RUN_ID_TAG: run_id, STATUS_TAG: 'running', 'mlflow.runName': name}
        commit = info.get('git_commit')
        if isinstance(commit, str) and commit:
            tags.setdefault('mlflow.source.git.commit', commit)

        self._last_step = -1
        if found is None:
            run = self.client.create_run(self._experiment_id, start_time=self._now_ms(),
                                         run_name=name)
            self._run_id, self._resumed = str(run.info.run_id), False
        else:
            self._run_id, self._resumed = str(found.info.run_id), True
            self.client.update_run(self._run_id, status='RUNNING', name=name)
            logged = found.data.params
            # MLflow cannot change a param: a value changed on resume (say, a
            # larger --max_epoch) goes to a tag
            tags.update({f'{CHANGED_TAG_PREFIX}{k}': v[:_MAX_TAG_LENGTH]
                         for k, v in params.items() if k in logged and logged[k] != v})
            params = {k: v for k, v in params.items() if k not in logged}
            history = self.client.get_metric_history(self._run_id, _EPOCH_METRIC)
            self._last_step = max((int(m.step) for m in history), default=-1)
        self._log(params=[entities.Param(k, v) for k, v in params.items()],
                  tags=[entities.RunTag(k, v) for k, v in tags.items()])
        run_dir = info.get('run_dir')
        if isinstance(run_dir, str) and os.path.isdir(run_dir):
            self._write_run_file(run_dir)

    def _write_run_file(self, run_dir: str) -> None:
        write_json(os.path.join(run_dir, RUN_FILE),
                   {'tracking_uri': self.client.tracking_uri,
                    'experiment_name': self._experiment_name,
                    'experiment_id': self._experiment_id, 'run_id': self._run_id})

    # ----------------------------------------------------------- the MetricSink
    def write_stats(self, scope: str, step: int, epoch: int,
                    stats: Mapping[str, Mapping[str, Any]]) -> None:
        """Keep the means of an epoch's statistics (scope ``'epoch'``) for :meth:`flush`."""
        if scope == 'epoch':
            self._epochs.append((step, epoch, {n: float(s['mean']) for n, s in stats.items()}))

    def write_best(self, values: Mapping[str, float], step: int) -> None:
        """Keep the best values for :meth:`flush`."""
        self._best.update(values)

    def write_results(self, values: Mapping[str, float]) -> None:
        """Log final results now (:meth:`log_results`)."""
        self.log_results(values)

    def flush(self) -> None:
        """Send the kept epochs and best values in one request (:meth:`log_epochs`)."""
        epochs, best = self._epochs, self._best
        if epochs or best:
            self._epochs, self._best = [], {}
            self.log_epochs(epochs, best or None)

    def close(self, status: str) -> None:
        """Send what is kept, then end the MLflow run (:meth:`finish`)."""
        try:
            self.flush()
        finally:
            self.finish(status)

    # ----------------------------------------------------------- sent at once
    def log_epoch(self, step: int, epoch: int, metrics: Mapping[str, float]) -> None:
        """Log the means of one epoch's metrics at the global step `step`.

        An epoch at a step not after the last one logged (replayed after a
        resume from an older checkpoint) is skipped.
        """
        self._require_run('log_epoch')
        self.log_epochs([(step, epoch, metrics)])

    def log_epochs(self, epochs: Sequence[tuple[int, int, Mapping[str, float]]],
                   best: Mapping[str, float] | None = None) -> None:
        """Log several epochs and the best values in one request.

        What an Experiment calls with the epochs it flushes at once (see
        :class:`~tfsnippet.experiment.sinks.RunSink`): the same as
        :meth:`log_epoch` for each epoch, then :meth:`log_best`.

        Args:
            epochs: ``(step, epoch, {name: mean})`` triples, oldest first.
            best: The best values so far, or ``None``.
        """
        self._require_run('log_epochs')
        metric = self._mlflow.entities.Metric
        batch: list[Any] = []
        last_step = self._last_step
        for step, epoch, metrics in epochs:
            for arg, value in (('step', step), ('epoch', epoch)):
                if isinstance(value, bool) or not isinstance(value, int):
                    raise TypeError(f'`{arg}` must be an int, got {typed_repr(value)}')
            if step <= last_step:
                continue
            batch += self._metrics(metrics, '', step, 'metrics')
            batch.append(metric(_EPOCH_METRIC, float(epoch), self._now_ms(), step))
            last_step = step
        if best:
            batch += self._metrics(best, _BEST_PREFIX, max(last_step, 0), 'best')
        self._log(metrics=batch)
        self._last_step = last_step

    def log_best(self, values: Mapping[str, float]) -> None:
        """Log the best values so far, as the metrics ``best_<name>``."""
        self._require_run('log_best')
        self._log(metrics=self._metrics(values, _BEST_PREFIX, max(self._last_step, 0), 'values'))

    def log_results(self, values: Mapping[str, float]) -> None:
        """Log final results, as metrics of their own names."""
        self._require_run('log_results')
        self._log(metrics=self._metrics(values, '', max(self._last_step, 0), 'values'))

    def log_artifacts(self, paths: Sequence[str]) -> None:
        """Upload files (or directories, as a folder of their name) as artifacts of
        the run: what an Experiment hands over when the run ends (its config,
        console log, results and a loop's exported best weights)."""
        run_id = self._require_run('log_artifacts')
        for path in paths:
            if os.path.isdir(path):
                self.client.log_artifacts(run_id, path, os.path.basename(path.rstrip(os.sep)))
            else:
                self.client.log_artifact(run_id, path)

    def finish(self, status: str) -> None:
        """End the MLflow run with the status matching `status`.

        Args:
            status: ``'completed'``, ``'failed'`` or ``'preempted'``.
        """
        run_id = self._require_run('finish')
        if status not in MLFLOW_STATUS:
            final = [s for s in RUN_STATUSES if s in MLFLOW_STATUS]
            raise ValueError(f'`status` must be one of {final}, got {typed_repr(status)}')
        self._log(tags=[self._mlflow.entities.RunTag(STATUS_TAG, status)])
        self.client.set_terminated(run_id, status=MLFLOW_STATUS[status],
                                   end_time=self._now_ms())


def _artifact_location(tracking_uri: str) -> str | None:
    """Where a new experiment of a local SQLite store keeps its artifacts: ``mlruns/``
    beside the database (MLflow's default, ``./mlruns``, depends on the working directory).
    ``None`` (the store's default) for other stores."""
    prefix = 'sqlite:///'
    if not tracking_uri.startswith(prefix) or tracking_uri == prefix + ':memory:':
        return None
    directory = os.path.dirname(os.path.abspath(tracking_uri[len(prefix):]))
    return 'file://' + os.path.join(directory, 'mlruns')


def mlflow_mirror_of(value: Any) -> MlflowMirror | None:
    """The mirror of the `mlflow` argument of :class:`~tfsnippet.Experiment`.

    Args:
        value: ``None`` or ``False``: no mirror; ``True``: a mirror to MLflow's
            default tracking URI (``MLFLOW_TRACKING_URI`` when it is set); a
            tracking URI (``'sqlite:///runs/mlflow.db'``, ``'http://host:5000'``)
            or a ``pathlib.Path`` of a SQLite file: a mirror to it; an
            :class:`MlflowMirror`: itself.

    Raises:
        TypeError: `value` is none of those.
        ImportError: MLflow is not installed.
    """
    if value is None or value is False:
        return None
    if value is True:
        return MlflowMirror()
    if isinstance(value, (str, os.PathLike)):
        return MlflowMirror(value)
    if isinstance(value, MlflowMirror):
        return value
    raise TypeError(f'`mlflow` must be a tracking URI (e.g. "sqlite:///mlflow.db"), True (the '
                    f'default URI), an MlflowMirror or None, got {typed_repr(value)}')
