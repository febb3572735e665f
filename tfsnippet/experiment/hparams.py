"""A run's config and final metrics as TensorBoard HParams data, for its dashboard."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from typing import Any

__all__ = ['HParamsWriter', 'hparam_value']

_STATUS = {'completed': 'STATUS_SUCCESS', 'failed': 'STATUS_FAILURE',
           'preempted': 'STATUS_UNKNOWN', 'running': 'STATUS_RUNNING'}


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
    of its HParams dashboard from them.  It uses the pure-Python event
    writer of :class:`~tfsnippet.SummaryWriter`.

    Args:
        logdir: The run directory.
    """

    def __init__(self, logdir: str) -> None:
        from ..scaffold.summary_writer import SummaryWriter
        self._writer = SummaryWriter(logdir)

    @property
    def logdir(self) -> str:
        """The directory of the event file."""
        return self._writer.logdir

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
            finite = {k: float(v) for k, v in metrics.items() if math.isfinite(float(v))}
            if finite:
                self._writer.add_scalars(finite, step=step)
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
        self._writer.add_summary(summary, step)

    def __repr__(self) -> str:
        return f'HParamsWriter({self.logdir!r})'
