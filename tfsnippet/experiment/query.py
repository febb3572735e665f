"""Filter and sort the runs of a results store with small `where` expressions, compiled to SQL."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union

from ..utils.status import RUN_STATUSES, STALE
from ..utils.text import close_matches_hint
from .store import ResultsStore, RunRow

__all__ = ['query', 'parse_where', 'parse_order_by', 'field_names', 'Field', 'Comparison',
           'Not', 'BoolOp', 'Node', 'OrderKey']

#: The kinds of field kept in a table of that name; ``run`` fields are columns of ``runs``.
#: Only these names ever reach SQL text: every value from an expression is a bound parameter.
_TABLES = ('metrics', 'best', 'results', 'config')
_RUN_FIELDS = ('run_id', 'name', 'status')
_SQL_OPS = {'=': '=', '==': '=', '!=': '!=', '<>': '!=', '<': '<', '<=': '<=', '>': '>',
            '>=': '>='}
_FLIPPED = {'=': '=', '!=': '!=', '<': '>', '<=': '>=', '>': '<', '>=': '<='}
_KEYWORDS = {'and', 'or', 'not', 'true', 'false'}

Value = Union[int, float, str]


# ------------------------------------------------------------------- syntax tree
@dataclass(frozen=True)
class Field:
    """A field named in an expression.

    Attributes:
        kind: ``'run'`` (`run_id`, `name`, `status`), ``'config'``,
            ``'metrics'``, ``'best'`` or ``'results'``.
        key: The name inside its kind: ``'optimizer.lr'`` for ``config.optimizer.lr``.
        text: The field as written.
        pos: Where it starts in the expression.
    """

    kind: str
    key: str
    text: str
    pos: int


@dataclass(frozen=True)
class Comparison:
    """``field op value``; `op` is one of ``= != < <= > >=``."""

    field: Field
    op: str
    value: Value
    value_pos: int


@dataclass(frozen=True)
class Not:
    """``not operand``."""

    operand: Node


@dataclass(frozen=True)
class BoolOp:
    """``operands[0] op operands[1] op ...``, `op` being ``'and'`` or ``'or'``."""

    op: str
    operands: tuple[Node, ...]


Node = Union[Comparison, Not, BoolOp]


@dataclass(frozen=True)
class OrderKey:
    """One key of an `order_by`: a field, ascending unless `descending`.

    `source` is the text the key was read from; ``field.pos`` is a position in it.
    """

    field: Field
    descending: bool
    source: str


# ---------------------------------------------------------------------- tokens
_TOKEN = re.compile(r'''
    (?P<space>\s+)
  | (?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?![\w.`]))
  | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<field>(?:[A-Za-z_]\w*|`[^`]*`)(?:\.(?:\w+|`[^`]*`))*)
  | (?P<op>==|!=|<>|<=|>=|=|<|>)
  | (?P<paren>[()])
  | (?P<bad>[^\s()<>=!'"`]+)
''', re.VERBOSE)


@dataclass(frozen=True)
class _Token:
    kind: str     # number, string, field, keyword, op, paren, end
    text: str
    pos: int
    value: Any = None


class _Syntax(Exception):
    def __init__(self, pos: int, message: str) -> None:
        super().__init__(message)
        self.pos = pos
        self.message = message


def _describe(token: _Token) -> str:
    return 'the end of the expression' if token.kind == 'end' else repr(token.text)


def _tokenize(text: str, offset: int = 0) -> list[_Token]:
    """The tokens of `text`, positions counted from `offset`, ending with an ``end`` token."""
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            char = text[pos]
            if char in '\'"':
                raise _Syntax(pos + offset, f'unterminated string starting with {char}')
            if char == '`':
                raise _Syntax(pos + offset, 'unterminated `quoted` field name')
            raise _Syntax(pos + offset, f'unexpected character {char!r}')
        kind = match.lastgroup
        raw = match.group()
        at = pos + offset
        if kind == 'number':
            value: Any = float(raw) if any(c in raw for c in '.eE') else int(raw)
            tokens.append(_Token('number', raw, at, value))
        elif kind == 'string':
            tokens.append(_Token('string', raw, at, _unquote(raw)))
        elif kind == 'field':
            if raw.lower() in _KEYWORDS:
                tokens.append(_Token('keyword', raw, at, raw.lower()))
            else:
                tokens.append(_Token('field', raw, at, _segments(raw)))
        elif kind in ('op', 'paren'):
            tokens.append(_Token(kind, raw, at, raw))
        elif kind == 'bad':
            raise _Syntax(at, f'{raw!r} is neither a field, a number, a quoted string nor '
                              f'a keyword')
        pos = match.end()
    tokens.append(_Token('end', '', len(text) + offset))
    return tokens


def _unquote(raw: str) -> str:
    return re.sub(r'\\(.)', r'\1', raw[1:-1])


def _segments(raw: str) -> list[str]:
    return [s[1:-1] if s.startswith('`') else s
            for s in re.findall(r'`[^`]*`|[^.`]+', raw)]


# ---------------------------------------------------------------------- parser
class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.i = 0

    @property
    def token(self) -> _Token:
        return self.tokens[self.i]

    def take(self) -> _Token:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def keyword(self, word: str) -> bool:
        if self.token.kind == 'keyword' and self.token.value == word:
            self.i += 1
            return True
        return False

    def parse(self) -> Node:
        node = self.parse_or()
        if self.token.kind != 'end':
            raise _Syntax(self.token.pos, f'expected `and`, `or` or the end of the '
                                          f'expression, got {_describe(self.token)}')
        return node

    def parse_or(self) -> Node:
        operands = [self.parse_and()]
        while self.keyword('or'):
            operands.append(self.parse_and())
        return operands[0] if len(operands) == 1 else BoolOp('or', tuple(operands))

    def parse_and(self) -> Node:
        operands = [self.parse_not()]
        while self.keyword('and'):
            operands.append(self.parse_not())
        return operands[0] if len(operands) == 1 else BoolOp('and', tuple(operands))

    def parse_not(self) -> Node:
        if self.keyword('not'):
            return Not(self.parse_not())
        if self.token.kind == 'paren' and self.token.text == '(':
            self.take()
            node = self.parse_or()
            if not (self.token.kind == 'paren' and self.token.text == ')'):
                raise _Syntax(self.token.pos, f'expected `)`, got {_describe(self.token)}')
            self.take()
            return node
        return self.parse_comparison()

    def parse_comparison(self) -> Comparison:
        first = self.take()
        if first.kind == 'field':
            op = self.take_op()
            value, value_pos = self.take_literal()
            return Comparison(_field(first), op, value, value_pos)
        if first.kind in ('number', 'string') or _is_bool(first):
            # `literal op field` reads as `field flipped-op literal`
            op = self.take_op()
            token = self.take()
            if token.kind != 'field':
                raise _Syntax(token.pos, f'expected a field, got {_describe(token)}')
            return Comparison(_field(token), _FLIPPED[op], _literal(first), first.pos)
        raise _Syntax(first.pos, f'expected a comparison such as `valid_loss < 0.1`, `not` or '
                                 f'`(`, got {_describe(first)}')

    def take_op(self) -> str:
        token = self.take()
        if token.kind != 'op':
            raise _Syntax(token.pos, f'expected a comparison operator (= == != < <= > >=), '
                                     f'got {_describe(token)}')
        return _SQL_OPS[token.text]

    def take_literal(self) -> tuple[Value, int]:
        token = self.take()
        if token.kind in ('number', 'string') or _is_bool(token):
            return _literal(token), token.pos
        raise _Syntax(token.pos, f'expected a number or a quoted string, got '
                                 f'{_describe(token)}')


def _is_bool(token: _Token) -> bool:
    return token.kind == 'keyword' and token.value in ('true', 'false')


def _literal(token: _Token) -> Value:
    if token.kind == 'keyword':
        return 1 if token.value == 'true' else 0
    value: Value = token.value
    return value


def _field(token: _Token) -> Field:
    segments: list[str] = token.value
    head = segments[0]
    quoted = token.text.startswith('`')
    if not quoted and head in _TABLES and len(segments) > 1:
        return Field(head, '.'.join(segments[1:]), token.text, token.pos)
    if not quoted and len(segments) == 1 and head in _RUN_FIELDS:
        return Field('run', head, token.text, token.pos)
    if not quoted and len(segments) == 1 and head in _TABLES:
        raise _Syntax(token.pos, f'`{head}` needs a name after it, as in `{head}.<name>`')
    return Field('metrics', '.'.join(segments), token.text, token.pos)


def _error(arg: str, text: str, pos: int, what: str, detail: str) -> ValueError:
    """``<arg>: <what> at position <pos>: <detail>``, then `text` with a caret under `pos`."""
    shown = re.sub(r'\s', ' ', text)
    return ValueError(f'`{arg}`: {what} at position {pos}: {detail}\n'
                      f'  {shown}\n  {" " * pos}^')


def parse_where(text: str) -> Node:
    """Parse a `where` expression into its syntax tree.

    Grammar, loosest first: ``a or b``, ``a and b``, ``not a``, ``(a)``
    and comparisons ``field op value`` (or ``value op field``) with `op`
    one of ``= == != < <= > >=``, and `value` a number, a quoted string
    (``'...'`` or ``"..."``, backslash escapes) or ``true``/``false`` (1/0).
    Keywords are case-insensitive.  A field is ``run_id``, ``name``,
    ``status``, ``config.<key>``, ``best.<metric>``, ``results.<metric>``,
    ``metrics.<metric>`` or a bare metric name; quote odd names in
    backticks: ```valid/loss` < 1``, ``config.`layer-1`.units > 8``.

    Raises:
        TypeError: `text` is not a str.
        ValueError: A syntax error; the message shows where, with a caret.
    """
    if not isinstance(text, str):
        raise TypeError(f'`where` must be a str, got {text!r} ({type(text).__name__})')
    try:
        return _Parser(text).parse()
    except _Syntax as e:
        raise _error('where', text, e.pos, 'syntax error', e.message) from None


def parse_order_by(order_by: str | Sequence[str]) -> list[OrderKey]:
    """Parse sort keys: fields, each ascending unless preceded by ``-`` or followed by ``desc``.

    `order_by` is one str, keys separated by commas (``"-best.acc, name"``,
    ``"valid_loss desc"``), or a sequence of str, one key each.

    Raises:
        TypeError: `order_by` is neither a str nor a sequence of str.
        ValueError: A key is not one field (the message shows where).
    """
    if isinstance(order_by, str):
        items, start = [], 0
        for part in order_by.split(','):
            items.append((order_by, part, start))
            start += len(part) + 1
    elif isinstance(order_by, Sequence) and all(isinstance(s, str) for s in order_by):
        items = [(item, item, 0) for item in order_by]
    else:
        raise TypeError(f'`order_by` must be a str or a sequence of str, got {order_by!r} '
                        f'({type(order_by).__name__})')
    keys = []
    for source, part, start in items:
        try:
            keys.append(_order_key(source, part, start))
        except _Syntax as e:
            raise _error('order_by', source, e.pos, 'syntax error', e.message) from None
    return keys


def _order_key(source: str, part: str, start: int) -> OrderKey:
    """One key of `source`, read from `part`, which starts at `start` in it."""
    body = part.lstrip()
    offset = start + len(part) - len(body)
    descending = False
    if body[:1] in ('-', '+'):
        descending = body[0] == '-'
        body, offset = body[1:], offset + 1
    tokens = _tokenize(body, offset)
    if tokens[0].kind != 'field':
        raise _Syntax(tokens[0].pos, f'expected a field, got {_describe(tokens[0])}')
    following = tokens[1]
    if following.kind == 'field' and following.text.lower() in ('asc', 'desc') \
            and not descending:
        descending = following.text.lower() == 'desc'
        following = tokens[2]
    if following.kind != 'end':
        raise _Syntax(following.pos, f'expected one field, then `,`, `asc` or `desc`, got '
                                     f'{_describe(following)}')
    return OrderKey(_field(tokens[0]), descending, source)


def field_names(fields: dict[str, set[str]]) -> list[str]:
    """Every field a query accepts, given the names a store has seen by kind.

    Args:
        fields: What :meth:`~tfsnippet.experiment.store.ResultsStore.fields` returns.

    Returns:
        ``run_id``, ``name``, ``status``, the bare metric names, then
        ``best.*``, ``results.*`` and ``config.*`` fields.
    """
    out = list(_RUN_FIELDS)
    out += sorted(fields['metrics'] | fields['results'])
    for kind in ('best', 'results', 'config'):
        out += [f'{kind}.{name}' for name in sorted(fields[kind])]
    return out


# -------------------------------------------------------------------- compiling
class _Compiler:
    """Turns a syntax tree into SQL over ``runs AS r``; every value is a bound parameter."""

    def __init__(self, known: dict[str, set[str]], stale_before: float, path: str) -> None:
        self.known = known
        self.stale_before = stale_before
        self.path = path
        self.params: list[Any] = []

    def check(self, field: Field, arg: str, text: str) -> None:
        if field.kind == 'run':
            return
        names = self.known['metrics'] | self.known['results'] if field.kind == 'metrics' \
            else self.known[field.kind]
        if field.key in names:
            return
        section = sorted(k for k in names if k.startswith(field.key + '.'))
        if section:
            hint = f'; it is a section: name one of its keys: ' \
                   f'{", ".join(f"{field.kind}.{k}" for k in section[:5])}'
        else:
            hint = close_matches_hint(field.text, field_names(self.known))
        raise _error(arg, text, field.pos, f'unknown field `{field.text}`',
                     f'no run in {self.path!r} has it{hint}')

    def value_sql(self, field: Field) -> tuple[str, list[Any]]:
        """SQL for the value of `field` in run ``r`` (NULL if it has none), and its parameters."""
        if field.kind == 'run':
            if field.key == 'status':
                return (f"(CASE WHEN r.status = 'running' AND r.heartbeat < ? THEN '{STALE}' "
                        f"ELSE r.status END)"), [self.stale_before]
            return f'r.{field.key}', []
        column = 'key' if field.kind == 'config' else 'name'
        return (f'(SELECT value FROM {field.kind} WHERE run_id = r.run_id '
                f'AND {column} = ?)'), [field.key]

    def where_sql(self, node: Node, text: str) -> str:
        if isinstance(node, BoolOp):
            joiner = ' AND ' if node.op == 'and' else ' OR '
            return '(' + joiner.join(self.where_sql(n, text) for n in node.operands) + ')'
        if isinstance(node, Not):
            return f'(NOT {self.where_sql(node.operand, text)})'
        return self.comparison_sql(node, text)

    def comparison_sql(self, node: Comparison, text: str) -> str:
        field, op, value = node.field, node.op, node.value
        self.check(field, 'where', text)
        is_text = isinstance(value, str)
        if field.kind == 'run':
            if not is_text:
                raise _error('where', text, node.value_pos, 'type error',
                             f'`{field.key}` is text: compare it with a quoted string, '
                             f'not {value!r}')
            statuses = RUN_STATUSES + (STALE,)
            if field.key == 'status' and op in ('=', '!=') and value not in statuses:
                raise _error('where', text, node.value_pos, f'unknown status {value!r}',
                             f'a status is one of {", ".join(map(repr, statuses))}')
            sql, params = self.value_sql(field)
            self.params += params + [value]
            return f'({sql} {op} ?)'
        if field.kind == 'config':
            guard = "typeof(value) = 'text'" if is_text else \
                "typeof(value) IN ('integer', 'real')"
            self.params += [field.key, value]
            return (f'r.run_id IN (SELECT run_id FROM config WHERE key = ? AND {guard} '
                    f'AND value {op} ?)')
        if is_text:
            raise _error('where', text, node.value_pos, 'type error',
                         f'`{field.text}` is a metric: compare it with a number, not {value!r}')
        # a subquery run once over the (name, value) index, then one probe per run
        self.params += [field.key, value]
        return (f'r.run_id IN (SELECT run_id FROM {field.kind} WHERE name = ? '
                f'AND value {op} ?)')


def query(root: str | os.PathLike[str] | ResultsStore, where: str | None = None,
          order_by: str | Sequence[str] | None = None,
          limit: int | None = None) -> list[RunRow]:
    """The runs of a results store that match `where`, sorted by `order_by`.

    Fields and metric values are what :class:`~tfsnippet.experiment.store.ResultsStore`
    describes: a bare metric name is the latest epoch mean of that metric,
    or the final result of the same name when there is one.  A comparison
    on a field a run does not have (or a NaN value) is false for that run,
    and a number never equals a string, so ``not (x = 1)`` keeps the runs
    without ``x``.  ``status`` reads ``'stale'`` for a run marked running
    whose heartbeat is older than the store's ``stale_after`` (pass an open
    store to choose it).  Fields are checked against the names the store
    has seen, so a typo fails instead of matching nothing.  Sorting puts
    numbers before strings, and runs without the value last.

    Example:
        ``query(root, where="valid_loss < 0.1 and config.lr >= 1e-3",
        order_by="valid_loss")`` returns the matching runs, best first; runs
        without the sort field come last, ties in the order runs started.

    Args:
        root: The store's directory, an open store, or the URL of a root
            of runs on object storage (``s3://bucket/runs``: its runs'
            records are read into a local index first, see
            :mod:`tfsnippet.experiment.remote`).
        where: An expression (see :func:`parse_where`); ``None`` or blank
            keeps every run.
        order_by: Sort keys (see :func:`parse_order_by`), ``-field`` for
            descending; ``None`` keeps the order in which runs started.
        limit: The most rows to return; ``None`` for all.

    Returns:
        :class:`~tfsnippet.experiment.store.RunRow` objects, with ``.run_id``,
        ``.name``, ``.status``, ``.config`` (nested), ``.metrics``, ``.best``
        and ``.results``.

    Raises:
        ValueError: `root` holds no store (a URL: no run records, or its
            bucket does not exist); `where` or `order_by` has a syntax
            error or names a field no run has (the message shows where, and
            suggests close names); `limit` is negative.
        TypeError: An argument has the wrong type.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
        raise TypeError(f'`limit` must be an int or None, got {limit!r} '
                        f'({type(limit).__name__})')
    if limit is not None and limit < 0:
        raise ValueError(f'`limit` must be >= 0, got {limit!r}')
    node = None if where is None or (isinstance(where, str) and not where.strip()) \
        else parse_where(where)
    text = where if isinstance(where, str) else ''
    keys = [] if order_by is None else parse_order_by(order_by)
    if isinstance(root, ResultsStore):
        store = root
    else:
        from .remote import open_results_store
        store = open_results_store(root)
    try:
        with store.snapshot() as conn:
            compiler = _Compiler(store.fields(conn), store.stale_before(), store.path)
            sql = 'SELECT r.run_id FROM runs AS r'
            if node is not None:
                sql += ' WHERE ' + compiler.where_sql(node, text)
            order = []
            for key in keys:
                compiler.check(key.field, 'order_by', key.source)
                value, params = compiler.value_sql(key.field)
                compiler.params += params + params   # the value appears twice
                direction = ' DESC' if key.descending else ''
                order.append(f'{value} IS NULL, {value}{direction}')
            sql += ' ORDER BY ' + ', '.join(order + ['r.created', 'r.run_id'])
            if limit is not None:
                sql += ' LIMIT ?'
                compiler.params.append(limit)
            ids = [run_id for (run_id,) in conn.execute(sql, compiler.params)]
            return store.load_rows(conn, ids)
    finally:
        if store is not root:
            store.close()
