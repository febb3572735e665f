"""Matching target variables to the names of a :class:`~.sources.Source`: a plan and its report.

:func:`plan_warm_start` decides, for each target variable, which stored
value of the source it gets, by the rules of
:func:`~tfsnippet.warm_start`: `include` and `exclude` first, then the
first `mapping` rule that matches the target's name, else the target's
place in the object structure (:mod:`.structure`, a Keras model, layer or
``tf.Module`` and a Keras weights file or ``tf.train.Checkpoint``), else
its own name.  It checks shapes and dtypes and refuses what cannot be done
(an ambiguous name, values that differ, nothing matched, a mapping that
looks reversed) before anything is read or assigned.  What was decided
is reported as a :class:`WarmStartReport` (the printed table).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from ...tfops.tf_vars import as_tf_variable, is_variable, normalize_variables, variable_name
from .state_format import CheckpointMismatchError
from .sources import SOURCE_KINDS, Source, describe_source, short_list
from .structure import (match_structure, realign_by_layer_names, structure_paths,
                        target_layer_names)

__all__ = ['WarmStartReport', 'WarmStartEntry', 'WarmStartPlan', 'MatchRules',
           'NothingMatchedError', 'compile_rules', 'collect_targets', 'plan_warm_start',
           'check_restore_match']

PatternLike = str | re.Pattern[str]
Replacement = str | Callable[[re.Match[str]], str] | None

_STATUSES = ('restored', 'skipped', 'mismatched', 'missing')


# ---------------------------------------------------------------- the report
@dataclass(frozen=True)
class WarmStartEntry:
    """What :func:`~tfsnippet.warm_start` did with one target variable.

    Attributes:
        target: The target's name (Keras ``path``, ``name`` without ``:0``,
            or its key when the targets are a dict).
        status: ``'restored'``, ``'skipped'`` (left out by `include`,
            `exclude` or a mapping to ``None``), ``'mismatched'`` (the source
            value has another shape or dtype) or ``'missing'`` (the source
            has no value of that name).
        source: The name looked up in the source, ``None`` when skipped (or
            when matched by layer name and no layer of its name is there).
        detail: The shape restored, why it was skipped, or what differs.
    """

    target: str
    status: str
    source: str | None
    detail: str


@dataclass(frozen=True)
class WarmStartReport:
    """The outcome of :func:`~tfsnippet.warm_start`, one entry per target variable.

    Attributes:
        source: The path that was read (a checkpoint directory or prefix, or
            a weights file; the checkpoint chosen when a folder was given).
        source_format: ``'tfsnippet'``, ``'tf2'`` (``tf.train.Checkpoint``),
            ``'tf1'`` (``tf.compat.v1.train.Saver``) or ``'keras_h5'``.
        entries: One :class:`WarmStartEntry` per target, in target order.
        unused: The source names that no target looked up.
        matched_by: ``'structure'`` when the targets (a Keras model, layer
            or ``tf.Module``) were found in the source by their object
            structure; ``'layer'`` when, a layer being elsewhere in the
            source's structure than in the target's (one inserted before
            it), they were found by their layers' names (see
            :mod:`~tfsnippet.scaffold.checkpoint.structure`); ``'name'``
            otherwise.
        chosen: Which checkpoint of the folder given as the source was
            read: ``'the best: valid_loss = 0.21, epoch 4, step 40'`` (the
            pinned best checkpoint) or ``'the newest: no best is pinned'``;
            ``''`` when the source was not a folder of tfsnippet checkpoints.
    """

    source: str
    source_format: str
    entries: tuple[WarmStartEntry, ...]
    unused: tuple[str, ...]
    matched_by: str = 'name'
    chosen: str = ''

    def _targets(self, status: str) -> list[str]:
        return [e.target for e in self.entries if e.status == status]

    @property
    def restored(self) -> list[str]:
        """Names of the targets given the source's values."""
        return self._targets('restored')

    @property
    def skipped(self) -> list[str]:
        """Names of the targets left out by `include`, `exclude` or `mapping`."""
        return self._targets('skipped')

    @property
    def mismatched(self) -> list[str]:
        """Names of the targets whose source value differs in shape or dtype."""
        return self._targets('mismatched')

    @property
    def missing(self) -> list[str]:
        """Names of the targets with no value in the source."""
        return self._targets('missing')

    def format_table(self) -> str:
        """The table :func:`~tfsnippet.warm_start` prints: one row per target, then totals."""
        kind = SOURCE_KINDS.get(self.source_format, self.source_format)
        header = ('status', 'target', 'source', 'detail')
        rows = [(e.status, e.target, '-' if e.source is None else e.source, e.detail)
                for e in self.entries]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
        by = {'structure': ' (matched by object structure)',
              'layer': ' (matched by layer name: the layers are not where the source has '
                       'them)'}.get(self.matched_by, '')
        chosen = f' ({self.chosen})' if self.chosen else ''
        lines = [f'Warm start from {kind} {self.source!r}{chosen}{by}']
        for row in [header, tuple('-' * w for w in widths), *rows]:
            lines.append('  '.join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        counts = ', '.join(f'{len(self._targets(s))} {s}' for s in _STATUSES)
        plural = '' if len(self.unused) == 1 else 's'
        footer = f'{counts}; {len(self.unused)} source value{plural} not used'
        if self.unused:
            footer += f': {short_list(self.unused)}'
        lines.append(footer)
        return '\n'.join(lines)


class NothingMatchedError(ValueError):
    """No target of :func:`~tfsnippet.warm_start` has a value in the source (the message
    lists names of both, to write a `mapping` from)."""


# ---------------------------------------------------------------- the plan
@dataclass(frozen=True)
class MatchRules:
    """`mapping`, `include` and `exclude` of :func:`~tfsnippet.warm_start`, compiled
    (by :func:`compile_rules`)."""

    mapping: list[tuple[re.Pattern[str], Replacement]]
    include: list[re.Pattern[str]] | None
    exclude: list[re.Pattern[str]] | None


def compile_rules(mapping: Any, include: Any, exclude: Any) -> MatchRules:
    """The rules of :func:`~tfsnippet.warm_start`'s arguments, checked and compiled.

    Raises:
        TypeError: An argument has the wrong type.
        ValueError: A regex is invalid.
    """
    return MatchRules(_compile_mapping(mapping), _compile_patterns(include, 'include'),
                      _compile_patterns(exclude, 'exclude'))


@dataclass(frozen=True)
class WarmStartPlan:
    """What :func:`plan_warm_start` decided: the report's entries, and the
    assignments to make.

    Attributes:
        entries: One :class:`WarmStartEntry` per target, in target order.
        assignments: ``(variable, storage key, the variable's dtype)`` of
            each target to restore.
        matched_by: ``'structure'``, ``'layer'`` or ``'name'``.
    """

    entries: tuple[WarmStartEntry, ...]
    assignments: tuple[tuple[Any, str, tf.DType], ...]
    matched_by: str

    def report(self, source: Source) -> WarmStartReport:
        """The :class:`WarmStartReport` of this plan for `source` (the names no
        target looked up are its unused ones)."""
        looked_up = {e.source for e in self.entries}
        unused = tuple(sorted(n for n in source.keys if n not in looked_up))
        return WarmStartReport(source.path, source.source_format, self.entries, unused,
                               self.matched_by, source.chosen)


def plan_warm_start(targets: Any, items: list[tuple[str, Any]], source: Source,
                    rules: MatchRules, skip_mismatch: bool) -> WarmStartPlan:
    """Match the named variables `items` (:func:`collect_targets` of `targets`)
    to the values of `source` by `rules`, by structure first when `targets` is
    an object; nothing is read or assigned.

    Raises:
        ValueError: `mapping` looks reversed; a name is recorded twice in
            the source; values differ in shape or dtype (without
            `skip_mismatch`); or no target has a value in the source.
    """
    _check_mapping_direction(rules.mapping, [name for name, _ in items], source)
    structure: dict[int, str | None] = {}
    matched_by = 'name'
    if hasattr(targets, 'variables') and not isinstance(targets, (Mapping, list, tuple)):
        by_place = match_structure(structure_paths(targets, source.source_format), source.keys)
        by_layer = realign_by_layer_names(by_place, target_layer_names(items),
                                          source.layer_names, _fits(items, source)) \
            if by_place else None
        structure = dict(by_place) if by_layer is None else by_layer
        matched_by = 'name' if not structure else 'structure' if by_layer is None else 'layer'

    entries: list[WarmStartEntry] = []
    to_assign: list[tuple[Any, str, tf.DType]] = []    # (variable, storage key, its dtype)
    problems: list[str] = []
    ambiguous: list[str] = []
    for name, var in items:
        src_name, skip_reason = _source_name(name, rules.include, rules.exclude,
                                             rules.mapping, structure.get(id(var), name))
        if src_name is None and not skip_reason:   # by layer name: none of its name there
            layer = name.split('/')[-2] if '/' in name else name
            entries.append(WarmStartEntry(name, 'missing', None,
                                          f'no layer {layer!r} in the source'))
            continue
        if src_name is None:
            entries.append(WarmStartEntry(name, 'skipped', None, skip_reason))
            continue
        keys = list(source.keys.get(src_name, []))
        if len(keys) > 1:
            ambiguous.append(f'{name!r} looks up {src_name!r}, stored as {keys}')
            continue
        if not keys:
            entries.append(WarmStartEntry(name, 'missing', src_name, 'not in the source'))
            continue
        tf_var = as_tf_variable(var)
        status, detail = _compare(tf_var, source, keys[0])
        entries.append(WarmStartEntry(name, status, src_name, detail))
        if status == 'restored':
            to_assign.append((var, keys[0], tf_var.dtype.base_dtype))
        else:
            problems.append(f'{name!r} <- {src_name!r}: {detail}')

    if ambiguous:
        raise ValueError(f'The {describe_source(source)} records a name more than once, so '
                         f'the value to restore is ambiguous: {"; ".join(ambiguous)}; '
                         f'`exclude` these targets')
    if problems and not skip_mismatch:
        raise ValueError(
            f'The values of {len(problems)} target(s) in the {describe_source(source)} differ '
            f'in shape or dtype: {", ".join(problems)}; pass `skip_mismatch=True` to leave '
            f'them alone, or `exclude` them')
    if not any(e.status in ('restored', 'mismatched') for e in entries):
        raise NothingMatchedError(_nothing_matched_message(source, entries))
    return WarmStartPlan(tuple(entries), tuple(to_assign), matched_by)


# ---------------------------------------------------------------- arguments
def collect_targets(targets: Any) -> list[tuple[str, Any]]:
    """``[(name, variable)]`` of `targets` (a list or dict of variables, or an
    object with ``.variables``), each variable once.

    Raises:
        TypeError: An item is not a variable, or a dict key not a str.
        ValueError: `targets` holds no variables.
    """
    items: list[tuple[str, Any]]
    if (hasattr(targets, 'variables') and not is_variable(targets) and
            not isinstance(targets, (str, bytes, Mapping, list, tuple))):
        items = _name_all(list(targets.variables), 'targets.variables')
    else:
        checked = normalize_variables(targets, 'targets')
        if isinstance(checked, dict):
            for key in checked:
                if not isinstance(key, str):
                    raise TypeError(f'`targets` keys must be str names, got {key!r}')
            items = list(checked.items())
        else:
            items = [(variable_name(v), v) for v in checked]
    out, seen = [], set()
    for name, var in items:
        if id(as_tf_variable(var)) not in seen:
            seen.add(id(as_tf_variable(var)))
            out.append((name, var))
    if not out:
        hint = (' (a Keras model creates its variables when it is built: call it on data '
                'or `model.build(input_shape)` first)' if hasattr(targets, 'variables') else '')
        raise ValueError(f'`targets` holds no variables{hint}, got {targets!r}')
    return out


def _name_all(variables: list[Any], arg_name: str) -> list[tuple[str, Any]]:
    """``[(name, variable)]``, checking that each of `variables` is a variable."""
    for i, var in enumerate(variables):
        if not is_variable(var):
            raise TypeError(f'`{arg_name}` must hold only variables (tf.Variable or '
                            f'keras.Variable), but item {i} is {var!r}')
    return [(variable_name(v), v) for v in variables]


def _compile(pattern: Any, arg_name: str) -> re.Pattern[str]:
    if isinstance(pattern, re.Pattern):
        return pattern
    if not isinstance(pattern, str):
        raise TypeError(f'`{arg_name}` must hold regexes (str or re.Pattern), got {pattern!r}')
    try:
        return re.compile(pattern)
    except re.error as e:
        raise ValueError(f'`{arg_name}` has an invalid regex {pattern!r}: {e}') from e


def _compile_patterns(patterns: Any, arg_name: str) -> list[re.Pattern[str]] | None:
    if patterns is None:
        return None
    if isinstance(patterns, (str, re.Pattern)):
        return [_compile(patterns, arg_name)]
    if not isinstance(patterns, Sequence):
        raise TypeError(f'`{arg_name}` must be a regex or a list of regexes, got {patterns!r}')
    return [_compile(p, arg_name) for p in patterns]


def _compile_mapping(mapping: Any) -> list[tuple[re.Pattern[str], Replacement]]:
    if mapping is None:
        return []
    if not isinstance(mapping, Mapping):
        raise TypeError(
            f'`mapping` must be a dict {{regex: replacement or None}}, got {mapping!r}')
    out = []
    for pattern, repl in mapping.items():
        if repl is not None and not isinstance(repl, str) and not callable(repl):
            raise TypeError(f'`mapping[{pattern!r}]` must be a replacement str, a function '
                            f'of the match or None, got {repl!r}')
        out.append((_compile(pattern, 'mapping'), repl))
    return out


def _shape_str(shape: Sequence[int | None] | tf.TensorShape) -> str:
    if isinstance(shape, tf.TensorShape):
        if shape.rank is None:
            return '<unknown>'
        shape = shape.as_list()
    return repr(tuple(shape))


def _castable(target: tf.DType, source: tf.DType) -> bool:
    """Whether a `source` value may be assigned to a `target` variable (cast if need be)."""
    return (target == source or (target.is_floating and source.is_floating) or
            (target.is_integer and source.is_integer) or
            (target.is_complex and source.is_complex))


def _source_name(name: str, includes: list[re.Pattern[str]] | None,
                 excludes: list[re.Pattern[str]] | None,
                 rules: list[tuple[re.Pattern[str], Replacement]],
                 default: str | None) -> tuple[str | None, str]:
    """``(the name to look up in the source, '')``, or ``(None, why the target is skipped)``;
    `default` (the structural match, or the name itself) is looked up when no rule of
    `mapping` matches (``(None, '')`` when it is ``None``: nothing to look up)."""
    if includes is not None and not any(p.search(name) for p in includes):
        return None, 'not matched by `include`'
    if excludes is not None and any(p.search(name) for p in excludes):
        return None, 'matched by `exclude`'
    for pattern, repl in rules:
        if pattern.search(name):
            if repl is None:
                return None, 'mapped to None'
            return pattern.sub(repl, name), ''
    return default, ''


def _fits(items: list[tuple[str, Any]], source: Source) -> Callable[[int, str], bool]:
    """``fits(id(variable), source name)``: whether that value is in `source`, once, and
    may be assigned to the variable of `items`."""
    variables = {id(var): var for _, var in items}

    def fits(key: int, name: str) -> bool:
        keys = source.keys.get(name, [])
        return (key in variables and len(keys) == 1 and
                _compare(as_tf_variable(variables[key]), source, keys[0])[0] == 'restored')
    return fits


def _compare(tf_var: tf.Variable, src: Source, key: str) -> tuple[str, str]:
    """``('restored', shape)`` or ``('mismatched', what differs)`` for the value under `key`."""
    shape, want_shape = tf_var.shape, src.shapes[key]
    dtype, want_dtype = tf_var.dtype.base_dtype, src.dtypes[key]
    if not shape.is_compatible_with(want_shape):
        return 'mismatched', f'shape {_shape_str(shape)} vs source {_shape_str(want_shape)}'
    if not _castable(dtype, want_dtype):
        return 'mismatched', f'dtype {dtype.name} vs source {want_dtype.name}'
    if dtype != want_dtype:
        return 'restored', f'{_shape_str(want_shape)}, cast from {want_dtype.name}'
    return 'restored', _shape_str(want_shape)


def _check_mapping_direction(rules: list[tuple[re.Pattern[str], Replacement]],
                             target_names: list[str], src: Source) -> None:
    """Refuse a `mapping` whose keys match no target name but match source names."""
    if not rules or any(p.search(n) for p, _ in rules for n in target_names):
        return
    hits = [(p.pattern, n) for p, _ in rules for n in sorted(src.keys) if p.search(n)]
    if hits:
        pattern, name = hits[0]
        raise ValueError(
            f'`mapping` looks reversed: it goes from target names to source names (the '
            f'opposite of tf.compat.v1.train.init_from_checkpoint\'s `assignment_map`), but '
            f'none of its keys {short_list([p.pattern for p, _ in rules])} matches a target '
            f'name, while {pattern!r} matches the source name {name!r}. Write it as '
            f'{{target regex: source name}}; the targets are named '
            f'{short_list(target_names)}')


def _nothing_matched_message(src: Source, entries: list[WarmStartEntry]) -> str:
    looked_up = [e.source for e in entries if e.source is not None]
    skipped = sum(e.status == 'skipped' for e in entries)
    if looked_up:
        what = (f'none of the {len(looked_up)} names looked up is there '
                f'({short_list(looked_up)})')
    else:
        what = (f'all {len(entries)} targets are skipped by `include`, `exclude` or '
                f'`mapping` ({short_list([e.target for e in entries])})')
    if skipped and looked_up:
        what += f'; {skipped} target(s) are skipped'
    source_names = sorted(src.keys)
    return (f'Nothing to warm-start from the {describe_source(src)}: {what}. '
            f'Its {len(source_names)} names are: {short_list(source_names) or "(none)"}. '
            f'Pass a `mapping` {{regex: replacement}} from target names to source names.')


def check_restore_match(path: str, var_dict: Mapping[str, Any],
                        saved_shapes: Mapping[str, list[int]], labels: Mapping[str, str],
                        saved_labels: Mapping[str, str]) -> None:
    """Raise :class:`CheckpointMismatchError` unless the checkpoint `path`, holding `saved_shapes`
    (``{key: shape}``, labelled `saved_labels`), has every variable of `var_dict`
    (labelled `labels`) in its shape and nothing else (a saver's restore)."""
    def named(keys: list[str], names: Mapping[str, str]) -> list[str]:
        return [k if names.get(k, k) == k else f'{k} ({names[k]})' for k in keys]

    missing = sorted(set(var_dict) - set(saved_shapes))
    unexpected = sorted(set(saved_shapes) - set(var_dict))
    mismatched = []
    for key in sorted(set(var_dict) & set(saved_shapes)):
        shape = var_dict[key].shape
        want = tuple(saved_shapes[key])
        if shape.rank is not None and tuple(shape.as_list()) != want:
            mismatched.append(
                f'{named([key], labels)[0]}: {tuple(shape.as_list())} vs saved {want}')
    if missing or unexpected or mismatched:
        raise CheckpointMismatchError(path, named(missing, labels),
                                      named(unexpected, saved_labels), mismatched)
