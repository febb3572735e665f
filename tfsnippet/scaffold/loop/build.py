"""The classic feature arguments of ``TrainLoop`` turned into loop components."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..components.base import LoopComponent
from ..components.checkpointer import Checkpointer
from ..components.early_stopping import EarlyStopping
from ..components.export import ExportBest
from ..components.preemption import Preemption
from ..components.summaries import SummaryLogger
from ..components.warm_start import WarmStart
from ...utils.validation import check_bool, check_positive_int
from ..loop_context import current_loop_context
from ..summary_writer import (DEFAULT_SUMMARY_SKIP_PATTERN, check_commit_freqs,
                              check_skip_pattern)

__all__ = ['build_components', 'DEFAULT_SUMMARY_SKIP_PATTERN']


def build_components(param_vars: Any = None, *,
                     valid_metric_name: str | None = 'valid_loss',
                     valid_metric_mode: str = 'auto',
                     early_stopping: bool = False,
                     early_stopping_patience: int | None = None,
                     checkpoint_dir: str | None = None,
                     checkpoint_epoch_freq: int | None = None,
                     checkpoint_step_freq: int | None = None,
                     checkpoint_secs: float | None = None,
                     checkpoint_max_to_keep: int | None = None,
                     checkpoint_save_objects: Mapping[str, Any] | None = None,
                     restore_checkpoint: bool | str = True,
                     checkpoint_keep_best: bool | str = False,
                     export_best: str | None = None,
                     checkpoint_async: bool = False,
                     summary_dir: str | None = None,
                     summary_writer: Any = None,
                     summary_graph: Any = None,
                     summary_metric_prefix: str = 'metrics/',
                     summary_skip_pattern: str | re.Pattern[str] | None =
                     DEFAULT_SUMMARY_SKIP_PATTERN,
                     summary_commit_freqs: Mapping[str, int] | None = None,
                     summary_histogram_freq: int | None = None,
                     warm_start: Any = None,
                     ) -> list[LoopComponent]:
    """The components that the feature arguments of :class:`~tfsnippet.TrainLoop` ask for.

    ``TrainLoop(...)`` calls it with its keyword arguments; a config loader
    can call it too and pass the result to :meth:`TrainLoop.add_component`.
    Every option is checked, whether or not the feature it belongs to is on.

    **Early stopping** (``early_stopping=True``): each time the metric
    `valid_metric_name` reaches a new best, the values of `param_vars` are
    copied in memory; when the ``with`` block is left normally they are
    assigned back (a line says from which step), when it is left through an
    exception (``KeyboardInterrupt`` included) the variables keep their
    latest values.  With ``early_stopping_patience=N`` the loop also stops
    after N validations in a row without improvement.  See
    :class:`~tfsnippet.EarlyStopping` for `min_delta` and `baseline`.

    **Checkpoints** (``checkpoint_dir=...``): saved under
    ``<checkpoint_dir>/checkpoint/checkpoint.dat-<step>/`` after every
    `checkpoint_epoch_freq` epochs, every `checkpoint_step_freq` steps,
    every `checkpoint_secs` seconds and at ``loop.make_checkpoint()``.  A
    checkpoint holds, in graph mode, every global variable of the graph; in
    eager mode, `param_vars` and the variables of every Keras model, layer,
    optimizer, ``tf.Module`` or variable in `checkpoint_save_objects`; the
    state of each :class:`~tfsnippet.CheckpointSavableObject` there; and the
    loop's own state (counters, best validation metric, the components'
    states).  Entering the loop resumes from the latest checkpoint
    (``restore_checkpoint=True``), from a given one (a path), or not at all
    (``False``), and says so.  Writes are atomic: a process killed during a
    save leaves the earlier checkpoints usable.  With ``checkpoint_async=True``
    a save blocks the loop only while it copies the state into host memory,
    and a background thread writes the files (one save in flight; its error
    is raised at the next step boundary; leaving the loop waits for it; see
    :class:`~tfsnippet.Checkpointer`).

    **The best checkpoint** (``checkpoint_keep_best=True``, or a metric name
    instead of the loop's `valid_metric_name`): at the end of each epoch in
    which the metric improved, that epoch's checkpoint is pinned as the
    best, kept beside the `checkpoint_max_to_keep` newest ones; with
    ``export_best=path`` its weights are written to `path` when the loop is
    left normally (a Keras ``.weights.h5`` in eager mode, a TF checkpoint
    directory in graph mode; see
    :meth:`~tfsnippet.scaffold.components.checkpointer.Checkpointer.export_best`).

    As components: a :class:`~tfsnippet.Checkpointer` (its save policies
    from the ``checkpoint_*_freq``/``checkpoint_secs`` keywords, its keep
    policies from `checkpoint_max_to_keep` and `checkpoint_keep_best`), a
    :class:`~tfsnippet.scaffold.components.preemption.Preemption` for
    ``SIGTERM`` (and, under SLURM, for the signal that requeues the job: see
    :meth:`~tfsnippet.scaffold.components.preemption.Preemption.for_cluster`) and, with `export_best`, an
    :class:`~tfsnippet.scaffold.components.export.ExportBest`; the latter two
    are added before the checkpointer, so that they exit after its final save.

    **Warm start** (``warm_start=...``): a run that resumes no checkpoint
    starts from other weights (see :class:`~tfsnippet.scaffold.components.warm_start.WarmStart`).

    **Summaries** (``summary_dir=...`` or ``summary_writer=...``): collected
    metrics become TensorBoard scalars ``summary_metric_prefix + name`` at the
    loop's step (names matching `summary_skip_pattern`, by default those
    ending in ``time``/``timer``, are skipped; ``summary_commit_freqs={name:
    N}`` writes every N-th value only), with a ``global_step/sec`` scalar at
    the end of each epoch and, with ``summary_histogram_freq=N``, histograms
    of `param_vars` every N epochs; ``loop.add_summary`` writes summaries from
    ``session.run``.  With `summary_dir` the loop opens and closes the
    writer (and writes `summary_graph`); a `summary_writer` is not closed.

    **Inside an open** :class:`~tfsnippet.Experiment` (a loop context
    provider, see :mod:`tfsnippet.scaffold.loop_context`): a
    :class:`~tfsnippet.scaffold.components.run_recorder.RunRecorder` records
    the loop into the run, and the first loop made without a
    `checkpoint_dir` checkpoints into the run directory
    (``Experiment.checkpoint_dir``), so that re-running the run resumes it.

    Raises:
        ValueError: An option of a feature that is off (``checkpoint_*``
            without `checkpoint_dir`, `early_stopping_patience` without
            `early_stopping`), or an option out of range.
        TypeError: An option of the wrong type.
    """
    components: list[LoopComponent] = []
    context = current_loop_context()
    claimed = None   # the context's checkpoint dir, taken once every option is checked
    if context is not None and checkpoint_dir is None:
        checkpoint_dir = claimed = context.claim_checkpoint_dir(take=False)
    if check_bool(early_stopping, 'early_stopping'):
        if not valid_metric_name:
            raise ValueError('`early_stopping=True` needs a `valid_metric_name`, got None')
        components.append(EarlyStopping(param_vars, early_stopping_patience,
                                        metric=valid_metric_name, mode=valid_metric_mode))
    elif early_stopping_patience is not None:
        raise ValueError('`early_stopping_patience` needs `early_stopping=True`')

    if checkpoint_dir is not None:
        checkpointer = Checkpointer(
            checkpoint_dir, epoch_freq=checkpoint_epoch_freq, step_freq=checkpoint_step_freq,
            secs=checkpoint_secs, max_to_keep=checkpoint_max_to_keep,
            save_objects=checkpoint_save_objects, restore=restore_checkpoint,
            variables=param_vars, keep_best=checkpoint_keep_best, preemption_signals=(),
            asynchronous=checkpoint_async)
        if export_best is not None:
            if checkpoint_keep_best is False:
                raise ValueError('`export_best` needs `checkpoint_keep_best`: the weights of '
                                 'the best checkpoint are what it exports')
            # before the checkpointer: components exit in reverse order, the export
            # after the final save, the preemption's exit status in between
            components.append(ExportBest(export_best, checkpointer))
        components += [Preemption.for_cluster(), checkpointer]
    else:
        given = [name for name, value, unset in (
            ('checkpoint_epoch_freq', checkpoint_epoch_freq, None),
            ('checkpoint_step_freq', checkpoint_step_freq, None),
            ('checkpoint_secs', checkpoint_secs, None),
            ('checkpoint_max_to_keep', checkpoint_max_to_keep, None),
            ('checkpoint_save_objects', checkpoint_save_objects, None),
            ('checkpoint_keep_best', checkpoint_keep_best, False),
            ('export_best', export_best, None),
            ('checkpoint_async', check_bool(checkpoint_async, 'checkpoint_async'), False),
        ) if value is not unset]
        if given:
            raise ValueError(f'The `checkpoint_*` options need `checkpoint_dir`; '
                             f'`{given[0]}` was given without it')

    if summary_dir is not None or summary_writer is not None:
        components.append(SummaryLogger(
            summary_dir=None if summary_writer is not None else summary_dir,
            summary_writer=summary_writer, metric_prefix=summary_metric_prefix,
            skip_pattern=summary_skip_pattern, commit_freqs=summary_commit_freqs,
            graph=summary_graph, histogram_freq=summary_histogram_freq))
    else:   # checked all the same: an error does not wait for `summary_dir`
        check_commit_freqs(summary_commit_freqs)
        check_skip_pattern(summary_skip_pattern)
        check_positive_int(summary_histogram_freq, 'summary_histogram_freq', allow_none=True)
        if not isinstance(summary_metric_prefix, str):
            raise TypeError(f'`summary_metric_prefix` must be a str, got '
                            f'{summary_metric_prefix!r}')
    if warm_start is not None:
        components.append(WarmStart(warm_start))
    if context is not None:
        components.extend(context.loop_components())
        if claimed is not None:
            context.claim_checkpoint_dir()
    return components
