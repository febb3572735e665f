"""Warm start: copy matching values of a checkpoint or weights file into other variables.

:func:`warm_start` initializes some variables from the saved values of
another run (a pre-trained encoder, the previous stage of a curriculum, a
model whose head changed shape) instead of resuming that run.  It reads
four kinds of sources:

* a tfsnippet checkpoint (``<root>/checkpoint/checkpoint.dat-<step>/``),
  the checkpoint root (a run folder) or the ``checkpoint/`` folder (then its
  best checkpoint when one is pinned, ``checkpoint_keep_best``, else its
  newest: the first line of the table says which);
* a ``tf.train.Checkpoint`` (object-graph) checkpoint, by prefix or folder;
* a ``tf.compat.v1.train.Saver`` checkpoint, by prefix or folder;
* a Keras weights file (``model.save_weights('x.weights.h5')``).

When `targets` is a Keras model or layer or a ``tf.Module`` and the
source a Keras ``.weights.h5`` file or a ``tf.train.Checkpoint``, its
variables are found by the *object structure* first, as Keras's
``load_weights`` and ``Checkpoint.restore`` find them (see
:mod:`~tfsnippet.scaffold.checkpoint.structure`): a fresh model of the
architecture that wrote the file needs no `mapping`, and one with layers
added after the source's gets the matching part (the others are reported
missing).  A layer inserted among them is told apart by the layers' names,
which the files record: when a layer sits elsewhere than in the source, the
layers are matched by name and the inserted one gets nothing (when every
layer was renamed, it gets the values at its place).  A `mapping` rule that
matches a target's name still decides for that target.

Otherwise values are matched by *name*, never by position: each target variable is
known by a human name and looked up under that name (after `mapping`)
among the names of the source (:mod:`~tfsnippet.scaffold.checkpoint.sources`
opens it, :mod:`~tfsnippet.scaffold.checkpoint.matching` makes the plan),
which are

============================  ================================================
source                        names of its values
============================  ================================================
tfsnippet checkpoint          the recorded variable names (Keras ``path``,
                              or ``name`` without ``:0``)
``tf.train.Checkpoint``       the keys without ``/.ATTRIBUTES/VARIABLE_VALUE``
                              (``model/_functional/_operations/1/_kernel``)
TF1 ``Saver`` checkpoint      the graph names without ``:0`` (``dense/kernel``)
Keras ``.weights.h5``         the dataset paths (``layers/dense/vars/0``)
============================  ================================================

A ``.weights.h5`` file keeps no variable names: a layer's values are
numbered in creation order, in a group named after the layer's *class*
(``layers/dense``, ``layers/dense_1``, ... whatever the layers' names), so
a warm start from one into a list of variables needs a `mapping` to those
paths (a model or layer as `targets` is matched by structure).  The error raised
when nothing matches lists the names of the source, to write it from.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...tfops.var_io import assign_variables
from ...utils.validation import check_bool
from .matching import (PatternLike, Replacement, WarmStartEntry, WarmStartReport,
                       collect_targets, compile_rules, plan_warm_start)
from .sources import open_source

__all__ = ['warm_start', 'WarmStartReport', 'WarmStartEntry']


# ---------------------------------------------------------------- warm_start
def warm_start(source: str | os.PathLike[str],
               targets: Sequence[Any] | Mapping[str, Any] | Any,
               mapping: Mapping[PatternLike, Replacement] | None = None,
               include: PatternLike | Sequence[PatternLike] | None = None,
               exclude: PatternLike | Sequence[PatternLike] | None = None,
               skip_mismatch: bool = False,
               print_func: Callable[[str], Any] | None = print,
               trust_pickle: bool = False) -> WarmStartReport:
    """Assign the values of `source` to those of `targets` that have a value there.

    Each target is known by a name: its Keras ``path``, its ``name``
    without ``:0``, or its key when `targets` is a dict.  A target is
    skipped if `include` is given and none of its regexes matches the name,
    or if a regex of `exclude` matches it.  Otherwise the first regex of
    `mapping` that matches the name rewrites it with ``re.sub`` (a ``None``
    replacement skips the target), and the result is looked up among the
    names of the source (see the module's table).  Regexes match anywhere
    in a name (``re.search``): anchor them with ``^`` and ``$``.

    Nothing is assigned unless every target found in the source has the
    same shape there, and a compatible dtype (floats are cast to floats and
    integers to integers).  The table of what was done goes to
    `print_func` as one string (:meth:`WarmStartReport.format_table`).

    Example: a pre-trained encoder, saved under other names, starts a new model.

        >>> import tempfile
        >>> from tfsnippet.scaffold.checkpoint import CheckpointSaver
        >>> from tfsnippet.scaffold.checkpoint.warm_start import warm_start
        >>> save_dir = tempfile.mkdtemp()
        >>> pretrained = [tf.Variable([1., 2.], name='enc/w'), tf.Variable([3.], name='enc/b')]
        >>> _ = CheckpointSaver(pretrained, save_dir).save(100)
        >>> w = tf.Variable([0., 0.], name='encoder/w')
        >>> head = tf.Variable([0., 0., 0.], name='head/w')
        >>> report = warm_start(save_dir, [w, head], mapping={'^encoder/': 'enc/'})
        Warm start from tfsnippet checkpoint '...-100' (the newest: no best is pinned)
        status    target     source  detail
        --------  ---------  ------  -----------------
        restored  encoder/w  enc/w   (2,)
        missing   head/w     head/w  not in the source
        1 restored, 0 skipped, 0 mismatched, 1 missing; 1 source value not used: enc/b
        >>> w.numpy()
        array([1., 2.], dtype=float32)
        >>> report.missing
        ['head/w']

    Args:
        source: A tfsnippet checkpoint directory, checkpoint root or
            ``checkpoint/`` folder (its pinned best checkpoint is read, else
            its newest; :attr:`WarmStartReport.chosen` says which); a
            ``tf.train.Checkpoint`` or TF1 ``Saver`` checkpoint prefix, its
            ``.index`` file or its folder (the ``checkpoint`` file there
            names the latest); or a Keras ``.weights.h5`` file.
        targets: A list or dict ``{name: variable}`` of graph, eager or
            Keras variables, or a Keras model or layer or a ``tf.Module``
            (its ``.variables``).
        mapping: An ordered dict ``{regex: replacement}`` from target names
            to source names (the opposite direction of
            ``tf.compat.v1.train.init_from_checkpoint``'s ``assignment_map``:
            a mapping whose keys match no target but match source names is
            refused as reversed); the replacement is a ``re.sub`` template,
            a function of the match, or ``None`` to skip the target.
        include: A regex, or a list of them: only targets whose name matches
            one are restored.
        exclude: A regex, or a list of them: targets whose name matches one
            are not restored.
        skip_mismatch: Leave the targets whose source value has another shape
            or dtype alone (reported as ``'mismatched'``) instead of raising.
        print_func: Receives the table; ``None`` prints nothing.
        trust_pickle: Read a legacy tfsnippet checkpoint (a pickled
            ``state.pkl`` of an earlier version), which may run code when
            loaded: only for a checkpoint whose author you trust.
            ``TFSNIPPET_TRUST_PICKLE=1`` says the same.  A current
            checkpoint holds data only and is safe to read without it.

    Returns:
        The :class:`WarmStartReport`, listing the targets restored, skipped,
        mismatched and missing.

    Raises:
        TypeError: An argument has the wrong type.
        ValueError: `source` is not a checkpoint or weights file; `targets`
            holds no variables; a regex is invalid; values differ in shape
            or dtype (without `skip_mismatch`); a target's source name is
            recorded twice in the source; or no target has a value in the
            source (write a `mapping`: the message lists names of both).
        CheckpointError: The source's files cannot be read.
        ~tfsnippet.scaffold.checkpoint.UntrustedCheckpointError:
            `source` is a legacy tfsnippet checkpoint and nothing says it is
            trusted: nothing was read or assigned.
        RuntimeError: Graph mode and no default session.

    .. note::
        In graph mode the values are assigned with the default session by
        feeding the variables' initializers, so no op is added (a finalized
        graph is fine) and the restored variables need not be initialized
        beforehand.  Running their initializers afterwards overwrites the
        values: initialize the others with
        :func:`~tfsnippet.utils.ensure_variables_initialized`.
    """
    if print_func is not None and not callable(print_func):
        raise TypeError(f'`print_func` must be callable or None, got {print_func!r}')
    rules = compile_rules(mapping, include, exclude)
    items = collect_targets(targets)
    src = open_source(source, check_bool(trust_pickle, 'trust_pickle'))
    try:
        plan = plan_warm_start(targets, items, src, rules, skip_mismatch)
        values = [np.asarray(src.read(key)).astype(dtype.as_numpy_dtype, copy=False)
                  for _, key, dtype in plan.assignments]
    finally:
        src.close()
    assign_variables([var for var, _, _ in plan.assignments], values)
    report = plan.report(src)
    if print_func is not None:
        print_func(report.format_table())
    return report
