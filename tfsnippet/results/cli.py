"""The ``python -m tfsnippet.results`` command line: list, show, compare and export runs."""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import IO, Any

from ..experiment.query import (BoolOp, Comparison, Field, Node, Not, field_names,
                                parse_order_by, parse_where, query)
from ..experiment.remote import open_results_store
from ..experiment.store import RunRow
from ..storage import StorageUnavailableError
from ..utils.text import close_matches_hint

__all__ = ['main', 'format_table', 'format_value']

PROG = 'python -m tfsnippet.results'
_MISSING = object()   # a config key a run lacks differs from one set to None
_MAX_DEFAULT_METRICS = 6   # `list` shows at most this many metrics when none is asked for


def format_value(value: Any) -> str:
    """How a cell shows a value: floats with 6 significant digits, ``-`` for none."""
    if value is None:
        return '-'
    if isinstance(value, float):
        return 'nan' if math.isnan(value) else f'{value:.6g}'
    return str(value)


def format_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """Lines of an aligned text table; numbers are right-aligned, text left-aligned.

    A missing value (``None``, shown ``-``) is right-aligned in a column that
    holds numbers.

    Example:
        >>> from tfsnippet.results.cli import format_table
        >>> for line in format_table(['run', 'loss'], [['a', 0.5], ['bb', 12]]):
        ...     print(line.rstrip())
        run  loss
        ---  ----
        a     0.5
        bb     12
    """
    table = [list(row) for row in rows]
    cells = [[format_value(v) for v in row] for row in table]
    numeric = [[_is_number(v) for v in row] for row in table]
    for i in range(len(header)):
        if any(flags[i] for flags in numeric):
            for row, flags in zip(table, numeric):
                flags[i] = flags[i] or row[i] is None
    widths = [len(h) for h in header]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = ['  '.join(h.ljust(w) for h, w in zip(header, widths)).rstrip(),
             '  '.join('-' * w for w in widths)]
    for row, flags in zip(cells, numeric):
        lines.append('  '.join(c.rjust(w) if n else c.ljust(w)
                               for c, n, w in zip(row, flags, widths)).rstrip())
    return lines


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _when(seconds: float | None) -> str:
    if seconds is None:
        return '-'
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec='seconds')


def _name(field: Field) -> str:
    """The name `RunRow.value` takes for a field: bare for metrics and run fields."""
    return field.key if field.kind in ('run', 'metrics') else f'{field.kind}.{field.key}'


def _fields_in(node: Node | None) -> list[str]:
    """The fields an expression names, in order of appearance, without repeats."""
    out: list[str] = []

    def walk(n: Node) -> None:
        if isinstance(n, Comparison):
            if _name(n.field) not in out:
                out.append(_name(n.field))
        elif isinstance(n, Not):
            walk(n.operand)
        elif isinstance(n, BoolOp):
            for operand in n.operands:
                walk(operand)

    if node is not None:
        walk(node)
    return out


# -------------------------------------------------------------------- commands
def _list(args: argparse.Namespace, out: IO[str]) -> None:
    rows = query(args.root, where=args.where, order_by=args.order_by, limit=args.limit)
    if args.columns is not None:
        extra = [c.strip() for c in args.columns.split(',') if c.strip()]
        with open_results_store(args.root) as store:
            known = field_names(store.fields())
        for column in extra:
            if column.removeprefix('metrics.') not in known:
                raise ValueError(f'`--columns`: unknown field {column!r}: no run in '
                                 f'{store.path!r} has it{close_matches_hint(column, known)}')
    else:
        where = parse_where(args.where) if args.where and args.where.strip() else None
        extra = _fields_in(where)
        for key in parse_order_by(args.order_by) if args.order_by else []:
            if _name(key.field) not in extra:
                extra.append(_name(key.field))
        extra += sorted({f'best.{n}' for r in rows for n in r.best} - set(extra))
        if not extra:
            extra = sorted({n for r in rows for n in r.metrics})[:_MAX_DEFAULT_METRICS]
    extra = [c for c in extra if c not in ('run_id', 'name', 'status')]
    header = ['run_id', 'name', 'status', 'epoch'] + extra
    table = [[r.run_id, r.name, r.status, r.epoch] + [r.value(c) for c in extra] for r in rows]
    for line in format_table(header, table):
        print(line, file=out)
    print(f'({len(rows)} run{"" if len(rows) == 1 else "s"})', file=out)


# meta keys that repeat a fact `show` prints at the top (as it was when the run started)
_META_SHOWN_ABOVE = ('run_id', 'name', 'status')


def _meta_for_show(meta: dict[str, Any]) -> dict[str, Any]:
    """The meta `show` prints: without the start-time copies of the run's facts,
    times (seconds since the epoch) as dates."""
    out = {k: v for k, v in meta.items() if k not in _META_SHOWN_ABOVE}
    if _is_number(out.get('started')):
        out['started'] = _when(out['started'])
    starts = out.get('starts')
    if isinstance(starts, list) and all(
            isinstance(s, dict) and _is_number(s.get('time')) for s in starts):
        out['starts'] = ', '.join(_when(s['time']) for s in starts) or '-'
    return out


def _show(args: argparse.Namespace, out: IO[str]) -> None:
    with open_results_store(args.root) as store:
        row = store.get_run(args.run)
        epochs = store.epochs(args.run)
    age = store.now() - row.heartbeat
    facts = [('run_id', row.run_id), ('name', row.name), ('status', row.status),
             ('created', _when(row.created)),
             ('heartbeat', f'{_when(row.heartbeat)} ({age:.0f}s ago)'),
             ('ended', _when(row.ended)),
             ('epoch', '-' if row.epoch is None else f'{row.epoch} (step {row.step})')]
    width = max(len(k) for k, _ in facts)
    for key, value in facts:
        print(f'{key.ljust(width)}  {value}', file=out)
    for title, values in (('config', row.flat_config), ('meta', _meta_for_show(row.meta)),
                          ('metrics', row.metrics), ('best', row.best),
                          ('results', row.results)):
        print(f'\n{title}', file=out)
        if not values:
            print('  (none)', file=out)
            continue
        width = max(len(k) for k in values)
        for key in sorted(values):
            print(f'  {key.ljust(width)}  {format_value(values[key])}', file=out)
    if not args.epochs:
        if epochs:
            print(f'\nepochs: {len(epochs)} recorded (`--epochs` shows the mean of each '
                  f'metric at each epoch)', file=out)
    else:
        names = sorted({n for e in epochs for n in e.metrics})
        print('\nepochs (means)', file=out)
        table = [[e.epoch, e.step] + [e.metrics[n]['mean'] if n in e.metrics else None
                                      for n in names] for e in epochs]
        for line in format_table(['epoch', 'step'] + names, table):
            print(f'  {line}', file=out)


def _compare(args: argparse.Namespace, out: IO[str]) -> None:
    with open_results_store(args.root) as store:
        rows = [store.get_run(run_id) for run_id in args.runs]
    header = ['field'] + [r.run_id for r in rows]
    configs = [r.flat_config for r in rows]
    keys = sorted({k for c in configs for k in c})
    differ = [k for k in keys if len({repr(c.get(k, _MISSING)) for c in configs}) > 1]
    print('config (fields that differ)', file=out)
    if differ:
        differences = [[k] + [c.get(k) for c in configs] for k in differ]
        for line in format_table(header, differences):
            print(f'  {line}', file=out)
    else:
        print('  (none: the configs are the same)', file=out)
    print('\nmetrics', file=out)
    table: list[list[Any]] = [['name', *(r.name for r in rows)],
                              ['status', *(r.status for r in rows)],
                              ['epoch', *(r.epoch for r in rows)]]
    for kind, attr in (('', 'metrics'), ('best.', 'best'), ('results.', 'results')):
        names = sorted({n for r in rows for n in getattr(r, attr)})
        table += [[kind + n] + [getattr(r, attr).get(n) for r in rows] for n in names]
    for line in format_table(header, table):
        print(f'  {line}', file=out)


def _export(args: argparse.Namespace, out: IO[str]) -> None:
    rows = query(args.root, where=args.where, order_by=args.order_by)
    header, table = export_rows(rows)
    if args.csv in (None, '-'):
        _write_csv(out, header, table)
    else:
        with open(args.csv, 'w', newline='', encoding='utf-8') as f:
            _write_csv(f, header, table)
        print(f'wrote {len(table)} run{"" if len(table) == 1 else "s"} to {args.csv}',
              file=sys.stderr)


def export_rows(rows: Sequence[RunRow]) -> tuple[list[str], list[list[Any]]]:
    """The header and rows of an export: one row per run, one column per field."""
    def names(attr: str) -> list[str]:
        return sorted({n for r in rows for n in getattr(r, attr)})

    columns = [('config', n) for n in names('flat_config')]
    columns += [(kind, n) for kind in ('metrics', 'best', 'results') for n in names(kind)]
    header = ['run_id', 'name', 'status', 'created', 'heartbeat', 'ended', 'epoch', 'step']
    header += [f'{kind}.{n}' for kind, n in columns]
    table = []
    for r in rows:
        line: list[Any] = [r.run_id, r.name, r.status, _when(r.created), _when(r.heartbeat),
                           None if r.ended is None else _when(r.ended), r.epoch, r.step]
        config = r.flat_config
        line += [config.get(n) if kind == 'config' else getattr(r, kind).get(n)
                 for kind, n in columns]
        table.append(line)
    return header, table


def _write_csv(f: IO[str], header: list[str], table: list[list[Any]]) -> None:
    writer = csv.writer(f, lineterminator='\n')
    writer.writerow(header)
    writer.writerows([['' if v is None else v for v in line] for line in table])


# ------------------------------------------------------------------------ main
_ORDER_HELP = ('sort by these fields, comma-separated; for descending order write '
               '"F desc" or --order-by=-F')


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description='List, show, compare and export the runs of a results store.')
    parser.add_argument('root', metavar='ROOT', help='the directory of the results store, or '
                        'the URL of a root of runs on object storage (s3://bucket/runs)')
    commands = parser.add_subparsers(dest='command', metavar='COMMAND', required=True)

    p = commands.add_parser('list', help='one line per run')
    p.add_argument('--where', metavar='EXPR', help='keep the runs matching EXPR, e.g. '
                   '"valid_loss < 0.1 and config.lr >= 1e-3"')
    p.add_argument('--order-by', metavar='F', help=_ORDER_HELP)
    p.add_argument('--limit', type=int, metavar='N', help='show at most N runs')
    p.add_argument('--columns', metavar='F,F', help='the fields to show after the status '
                   '(default: those in --where and --order-by, then best values)')
    p.set_defaults(handler=_list)

    p = commands.add_parser('show', help='everything about one run')
    p.add_argument('run', metavar='RUN', help='the run id')
    p.add_argument('--epochs', action='store_true', help='also the mean of each metric '
                   'at each epoch')
    p.set_defaults(handler=_show)

    p = commands.add_parser('compare', help='config fields that differ, and metrics side by '
                            'side')
    p.add_argument('runs', metavar='RUN', nargs='+', help='two run ids or more')
    p.set_defaults(handler=_compare)

    p = commands.add_parser('export', help='every run as a table')
    p.add_argument('--csv', metavar='FILE', nargs='?', const='-', required=True,
                   help='write CSV to FILE (default: standard output)')
    p.add_argument('--where', metavar='EXPR', help='keep the runs matching EXPR')
    p.add_argument('--order-by', metavar='F', help=_ORDER_HELP)
    p.set_defaults(handler=_export)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with `argv` (default: ``sys.argv[1:]``); return the exit status.

    A bad command line, an unknown run, a missing store or a bad
    expression prints a message to standard error and returns 2.
    """
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:   # argparse has printed the usage and the problem
        return e.code if isinstance(e.code, int) else 2
    if args.command == 'compare' and len(args.runs) < 2:
        parser.print_usage(sys.stderr)
        print(f'{PROG}: error: compare needs two runs or more, got {len(args.runs)}',
              file=sys.stderr)
        return 2
    try:
        args.handler(args, sys.stdout)
    except (ValueError, StorageUnavailableError) as e:
        print(f'{PROG}: error: {e}', file=sys.stderr)
        return 2
    return 0
