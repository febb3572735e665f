"""A run's config and final metrics as TensorBoard HParams data, for its dashboard."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from typing import Any

__all__ = ['HParamsWriter', 'HParamsSink', 'hparam_value']

_STATUS = {'completed': 'STATUS_SUCCESS', 'failed': 'STATUS_FAILURE',
           'preempted': 'STATUS_UNKNOWN', 'pruned': 'STATUS_UNKNOWN', 'running': 'STATUS_RUNNING'}


def hparam_value(value: Any) -> bool | float | str:
    """A config value as the HParams plugin can show it: bool, float or str
    (``None`` and lists become their JSON text)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return value
    return json.dumps(value)


class HParamsWriter:
    """Writes one session of TensorBoard's HParams plugin into a run directory.

    :meth:`start` writes the flattened config as the session's hparams,
    :meth:`finish` the final metrics as scalars (at the run's last step) and
    the session's end with its status.  TensorBoard pointed at the parent
    of many run directories lists each as a session, and infers the columns
    of its HParams dashboard from them.  It uses tensorboard's pure-Python
    event file writer (no TensorFlow).

    Args:
        logdir: The run directory.
    """

    def __init__(self, logdir: str) -> None:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
        self._writer = EventFileWriter(logdir)

    @property
    def logdir(self) -> str:
        """The directory of the event file."""
        return str(self._writer.get_logdir())

    def start(self, hparams: Mapping[str, Any], group_name: str = '',
              start_time: float | None = None) -> None:
        """Write the session's start: ``{name: value}`` hparams (flattened config)."""
        from tensorboard.plugins.hparams import plugin_data_pb2
        info = plugin_data_pb2.SessionStartInfo(
            group_name=group_name,
            start_time_secs=time.time() if start_time is None else start_time)
        for name, value in hparams.items():
            value = hparam_value(value)
            if isinstance(value, bool):
                info.hparams[name].bool_value = value
            elif isinstance(value, float):
                info.hparams[name].number_value = value
            else:
                info.hparams[name].string_value = value
        self._write('session_start_info', plugin_data_pb2.HParamsPluginData(
            session_start_info=info), step=0)
        self._writer.flush()

    def finish(self, metrics: Mapping[str, float], status: str, step: int = 0,
               end_time: float | None = None) -> None:
        """Write the final `metrics` as scalars at `step`, then the session's end, and close."""
        from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2
        try:
            from tensorboard.compat.proto import summary_pb2
            finite = {k: float(v) for k, v in metrics.items() if math.isfinite(float(v))}
            if finite:
                self._add(step, summary_pb2.Summary(value=[
                    summary_pb2.Summary.Value(tag=tag, simple_value=v)
                    for tag, v in finite.items()]))
            info = plugin_data_pb2.SessionEndInfo(
                status=api_pb2.Status.Value(_STATUS.get(status, 'STATUS_UNKNOWN')),
                end_time_secs=time.time() if end_time is None else end_time)
            self._write('session_end_info', plugin_data_pb2.HParamsPluginData(
                session_end_info=info), step=step)
        finally:
            self._writer.close()

    def _write(self, kind: str, data: Any, step: int) -> None:
        from tensorboard.compat.proto import summary_pb2
        from tensorboard.plugins.hparams import metadata
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(
            tag=f'_hparams_/{kind}', metadata=metadata.create_summary_metadata(data),
            tensor=metadata.NULL_TENSOR)])
        self._add(step, summary)

    def _add(self, step: int, summary: Any) -> None:
        from tensorboard.compat.proto import event_pb2
        self._writer.add_event(event_pb2.Event(wall_time=time.time(), step=int(step),
                                               summary=summary))

    def __repr__(self) -> str:
        return f'HParamsWriter({self.logdir!r})'


class HParamsSink:
    """The run's HParams session as a :class:`~tfsnippet.scaffold.metrics.sinks.MetricSink`
    (its five methods; it imports no TensorFlow).

    What an :class:`~tfsnippet.Experiment` writes with ``hparams=True``:
    :meth:`start` writes the session's start (the flattened config), the
    sink keeps the best values and the final results it receives and the
    last step, and :meth:`close` writes them as ``best/<name>`` and
    ``results/<name>`` scalars at that step, then the session's end.

    Args:
        logdir: The run directory.
    """

    def __init__(self, logdir: str) -> None:
        self._writer = HParamsWriter(logdir)
        self._best: dict[str, float] = {}
        self._results: dict[str, float] = {}
        self._last_step = 0
        self._closed = False

    def carry_over(self, best: Mapping[str, float], results: Mapping[str, float],
                   step: int) -> None:
        """Repeat what the earlier starts of a resumed run recorded: their best values,
        final results and last step (what :meth:`close` writes unless replaced)."""
        self._best.update(best)
        self._results.update(results)
        self._last_step = max(self._last_step, int(step))

    @property
    def writer(self) -> HParamsWriter:
        """The writer of the session."""
        return self._writer

    def start(self, run_id: str, name: str, config: Mapping[str, Any],
              info: Mapping[str, Any]) -> None:
        """Write the session's start: the flattened `config`, in the group `run_id`."""
        from .store import flatten_config
        self._writer.start(flatten_config(config, check=False), run_id)

    def write_stats(self, scope: str, step: int, epoch: int,
                    stats: Mapping[str, Mapping[str, Any]]) -> None:
        self._last_step = max(self._last_step, int(step))

    def write_best(self, values: Mapping[str, float], step: int) -> None:
        self._best.update(values)
        self._last_step = max(self._last_step, int(step))

    def write_results(self, values: Mapping[str, float]) -> None:
        self._results.update(values)

    def flush(self) -> None:
        """Nothing to do: the session is written at :meth:`start` and :meth:`close`."""

    def close(self, status: str) -> None:
        """Write the best values and results at the last step, then the session's end."""
        if self._closed:
            return
        self._closed = True
        metrics = {**{f'best/{k}': v for k, v in self._best.items()},
                   **{f'results/{k}': v for k, v in self._results.items()}}
        self._writer.finish(metrics, status, step=self._last_step)

    def __repr__(self) -> str:
        return f'HParamsSink({self._writer.logdir!r})'
