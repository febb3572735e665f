"""Tests of `where` / `order_by` expressions over a results store, and of their errors."""

from __future__ import annotations

import math
import random
import re

import pytest

from tfsnippet.experiment.query import parse_order_by, parse_where, query
from tfsnippet.experiment.store import ResultsStore, RunRow


@pytest.fixture
def store(tmp_path, fake_clock):
    """Five runs; r4 is marked running but silent for 100 s (stale), r5 is running."""
    with ResultsStore(tmp_path, clock=fake_clock, stale_after=60.) as s:
        s.start_run('r1', 'base', {'optimizer': {'name': 'adam', 'lr': 1e-3}, 'batch_size': 64,
                                   'use_bn': True})
        s.log_epochs('r1', [(10, 1, {'valid_loss': 0.2, 'train_loss': 0.5}),
                            (20, 2, {'valid_loss': 0.08, 'train_loss': 0.05})])
        s.set_best('r1', {'valid_loss': 0.08})
        s.update_results('r1', {'test_acc': 0.91})
        s.set_status('r1', 'completed')
        fake_clock.advance(1.)
        s.start_run('r2', 'sgd', {'optimizer': {'name': 'sgd', 'lr': 1e-2}, 'batch_size': 128,
                                  'use_bn': False})
        s.log_epoch_metrics('r2', 10, 1, {'valid_loss': 0.15, 'train_loss': 0.1})
        s.set_best('r2', {'valid_loss': 0.12})
        s.set_status('r2', 'failed')
        fake_clock.advance(1.)
        s.start_run('r3', 'small-lr', {'optimizer': {'name': 'adam', 'lr': 1e-4},
                                       'batch_size': 64})
        s.log_epoch_metrics('r3', 10, 1, {'valid_loss': 0.05})
        s.set_best('r3', {'valid_loss': 0.05})
        s.update_results('r3', {'valid_loss': 0.3})    # the final result wins over 0.05
        s.set_status('r3', 'completed')
        fake_clock.advance(1.)
        s.start_run('r4', 'silent', {'optimizer': {'name': 'adam', 'lr': 3e-3},
                                     'batch_size': '64'})
        fake_clock.advance(100.)
        s.start_run('r5', 'running', {'optimizer': {'name': 'adam', 'lr': 1e-3}})
        s.log_epoch_metrics('r5', 10, 1, {'valid_loss': math.nan, 'train_loss': 0.3})
        yield s


def ids(rows: list[RunRow]) -> list[str]:
    return [r.run_id for r in rows]


# ------------------------------------------------------------------ filtering
@pytest.mark.parametrize('where, expected', [
    ('valid_loss < 0.1', ['r1']),
    ('valid_loss <= 0.15', ['r1', 'r2']),
    ('valid_loss = 0.15', ['r2']),
    ('valid_loss == 0.15', ['r2']),
    ('valid_loss != 0.15', ['r1', 'r3']),       # r4 has none, r5's is NaN
    ('valid_loss <> 0.15', ['r1', 'r3']),
    ('valid_loss > 0.1', ['r2', 'r3']),
    ('valid_loss >= 0.3', ['r3']),              # r3's final result, not its epoch value
    ('0.1 > valid_loss', ['r1']),
    ('metrics.valid_loss < 0.1', ['r1']),
    ('results.valid_loss > 0', ['r3']),
    ('best.valid_loss < 0.1', ['r1', 'r3']),
    ('results.test_acc >= 0.9', ['r1']),
    ('train_loss < 1e-1', ['r1']),
    ('config.optimizer.lr >= 1e-3', ['r1', 'r2', 'r4', 'r5']),
    ("config.optimizer.name = 'adam'", ['r1', 'r3', 'r4', 'r5']),
    ('config.optimizer.name = "sgd"', ['r2']),
    ('config.batch_size = 64', ['r1', 'r3']),   # r4's is the string '64'
    ("config.batch_size = '64'", ['r4']),
    ("config.optimizer.lr < 'x'", []),          # a number never compares with a string
    ('config.use_bn = true', ['r1']),
    ('config.use_bn = FALSE', ['r2']),
    ('valid_loss < 0.1 and config.optimizer.lr >= 1e-3', ['r1']),
    ("config.optimizer.name = 'sgd' or best.valid_loss < 0.06", ['r2', 'r3']),
    # `and` binds tighter than `or`; parentheses change that
    ("config.batch_size = 128 or config.optimizer.name = 'adam' and valid_loss < 0.1",
     ['r1', 'r2']),
    ("(config.batch_size = 128 or config.optimizer.name = 'adam') and valid_loss < 0.1",
     ['r1']),
    ("((config.batch_size = 128)) AND (valid_loss < 1 Or valid_loss > 1)", ['r2']),
    ('not valid_loss < 0.1', ['r2', 'r3', 'r4', 'r5']),   # no value: not (false)
    ("not (status = 'completed' or status = 'failed')", ['r4', 'r5']),
    ("not not status = 'failed'", ['r2']),
    ("valid_loss < 0.1 and not status = 'failed'", ['r1']),
    ("status = 'stale'", ['r4']),
    ("status = 'running'", ['r5']),
    ("status != 'completed'", ['r2', 'r4', 'r5']),
    ("name = 'sgd'", ['r2']),
    ("run_id >= 'r4'", ['r4', 'r5']),
    ('`valid_loss` < 0.1', ['r1']),
])
def test_where_selects_the_matching_runs(store, where, expected):
    assert ids(query(store, where=where)) == expected


def test_rows_carry_config_metrics_best_and_results(store):
    [row] = query(store, where="name = 'base'")
    assert (row.run_id, row.name, row.status) == ('r1', 'base', 'completed')
    assert row.config == {'optimizer': {'name': 'adam', 'lr': 1e-3}, 'batch_size': 64,
                          'use_bn': True}
    assert row.metrics == {'valid_loss': 0.08, 'train_loss': 0.05, 'test_acc': 0.91}
    assert row.best == {'valid_loss': 0.08}
    assert row.results == {'test_acc': 0.91}


def test_no_where_or_a_blank_one_keeps_every_run_in_start_order(store, tmp_path):
    assert ids(query(store)) == ['r1', 'r2', 'r3', 'r4', 'r5']
    assert ids(query(store, where='  ')) == ['r1', 'r2', 'r3', 'r4', 'r5']
    assert ids(query(tmp_path, where='valid_loss < 0.1')) == ['r1']   # by root, too


def test_quotes_in_values_are_data_not_sql(store):
    store.start_run('q', 'it\'s "quoted"', {})
    assert ids(query(store, where=r"""name = 'it\'s "quoted"'""")) == ['q']
    assert ids(query(store, where=r'name = "it\'s \"quoted\""')) == ['q']
    assert query(store, where=r"name = 'x\' OR \'1\'=\'1'") == []
    with pytest.raises(ValueError, match='syntax error'):
        query(store, where="name = 'x'' OR 1=1 --'")
    with pytest.raises(ValueError, match='unknown field'):
        query(store, where="`a'; DROP TABLE runs; --` < 1")
    assert len(query(store)) == 6   # the table is still there


# ------------------------------------------------------------------- ordering
@pytest.mark.parametrize('order_by, expected', [
    ('valid_loss', ['r1', 'r2', 'r3', 'r4', 'r5']),       # no value (r4) or NaN (r5) last
    ('-valid_loss', ['r3', 'r2', 'r1', 'r4', 'r5']),
    ('valid_loss desc', ['r3', 'r2', 'r1', 'r4', 'r5']),
    ('valid_loss ASC', ['r1', 'r2', 'r3', 'r4', 'r5']),
    ('+best.valid_loss', ['r3', 'r1', 'r2', 'r4', 'r5']),
    ('config.batch_size', ['r1', 'r3', 'r2', 'r4', 'r5']),   # ties in start order; numbers
    ('config.optimizer.name, -best.valid_loss', ['r1', 'r3', 'r4', 'r5', 'r2']),
    (['config.optimizer.name', '-best.valid_loss'], ['r1', 'r3', 'r4', 'r5', 'r2']),
    ('-run_id', ['r5', 'r4', 'r3', 'r2', 'r1']),
    ('status, name', ['r1', 'r3', 'r2', 'r5', 'r4']),
])
def test_order_by_sorts_with_missing_values_last(store, order_by, expected):
    assert ids(query(store, order_by=order_by)) == expected


def test_limit_keeps_the_first_rows(store):
    assert ids(query(store, where='best.valid_loss > 0', order_by='best.valid_loss',
                     limit=2)) == ['r3', 'r1']
    assert query(store, limit=0) == []


# ------------------------------------------------------------------- errors
def test_an_unknown_field_is_named_with_close_matches(store):
    message = (f"`where`: unknown field `valid_los` at position 18: no run in "
               f"{store.path!r} has it; close matches: valid_loss, best.valid_loss, "
               f"results.valid_loss, train_loss\n"
               f"  train_loss < 1 or valid_los < 0.1\n"
               f"                    ^")
    with pytest.raises(ValueError, match=f'^{re.escape(message)}$'):
        query(store, where='train_loss < 1 or valid_los < 0.1')


def test_a_config_section_is_not_a_field(store):
    message = (f"`where`: unknown field `config.optimizer` at position 0: no run in "
               f"{store.path!r} has it; it is a section: name one of its keys: "
               f"config.optimizer.lr, config.optimizer.name\n"
               f"  config.optimizer = 'adam'\n"
               f"  ^")
    with pytest.raises(ValueError, match=f'^{re.escape(message)}$'):
        query(store, where="config.optimizer = 'adam'")


def test_a_syntax_error_is_shown_with_a_caret(store):
    message = ("`where`: syntax error at position 21: expected a comparison such as "
               "`valid_loss < 0.1`, `not` or `(`, got 'and'\n"
               "  valid_loss < 0.1 and and x\n"
               "                       ^")
    # position 21 is the second `and`: the first one was read as the connective
    with pytest.raises(ValueError, match=f'^{re.escape(message)}$'):
        query(store, where='valid_loss < 0.1 and and x')


@pytest.mark.parametrize('where, position, detail', [
    ('valid_loss 0.1', 11, 'expected a comparison operator (= == != < <= > >=), got '
                           "'0.1'"),
    ('valid_loss <', 12, 'expected a number or a quoted string, got the end of the '
                         'expression'),
    ('(valid_loss < 1', 15, 'expected `)`, got the end of the expression'),
    ('valid_loss < 1)', 14, "expected `and`, `or` or the end of the expression, got ')'"),
    ('valid_loss < 1 valid_loss > 0', 15, "expected `and`, `or` or the end of the "
                                          "expression, got 'valid_loss'"),
    ('and valid_loss < 1', 0, "expected a comparison such as `valid_loss < 0.1`, `not` "
                              "or `(`, got 'and'"),
    ('', 0, 'expected a comparison such as `valid_loss < 0.1`, `not` or `(`, got the end of '
            'the expression'),
    ('()', 1, "expected a comparison such as `valid_loss < 0.1`, `not` or `(`, got ')'"),
    ("name = 'open", 7, "unterminated string starting with '"),
    ('`valid_loss < 1', 0, 'unterminated `quoted` field name'),
    ('valid_loss ! 1', 11, "unexpected character '!'"),
    ('valid_loss < 1abc', 13, "'1abc' is neither a field, a number, a quoted string nor a "
                              "keyword"),
    ('1 < 2', 4, "expected a field, got '2'"),
    ('valid_loss < other_loss', 13, "expected a number or a quoted string, got "
                                    "'other_loss'"),
    ('config < 1', 0, '`config` needs a name after it, as in `config.<name>`'),
])
def test_malformed_expressions_are_refused(where, position, detail):
    message = (f'`where`: syntax error at position {position}: {detail}\n'
               f'  {where}\n  {" " * position}^')
    with pytest.raises(ValueError, match=f'^{re.escape(message)}$'):
        parse_where(where)


@pytest.mark.parametrize('where, position, what, detail', [
    ("valid_loss < 'low'", 13, 'type error',
     "`valid_loss` is a metric: compare it with a number, not 'low'"),
    ('name = 3', 7, 'type error', "`name` is text: compare it with a quoted string, not 3"),
    ("status = 'done'", 9, "unknown status 'done'",
     "a status is one of 'running', 'completed', 'failed', 'preempted', 'pruned', 'stale'"),
])
def test_comparisons_of_the_wrong_type_are_refused(store, where, position, what, detail):
    message = f'`where`: {what} at position {position}: {detail}\n  {where}\n  ' \
              f'{" " * position}^'
    with pytest.raises(ValueError, match=f'^{re.escape(message)}$'):
        query(store, where=where)


def test_an_unknown_sort_field_is_shown_in_the_whole_order_by(store):
    message = (f"`order_by`: unknown field `best.valid_los` at position 13: no run in "
               f"{store.path!r} has it; close matches: best.valid_loss, results.valid_loss, "
               f"valid_loss\n"
               f"  valid_loss, -best.valid_los\n"
               f"               ^")
    with pytest.raises(ValueError, match=f'^{re.escape(message)}$'):
        query(store, order_by='valid_loss, -best.valid_los')


@pytest.mark.parametrize('order_by, position, detail', [
    ('valid_loss,', 11, 'expected a field, got the end of the expression'),
    ('valid_loss x', 11, "expected one field, then `,`, `asc` or `desc`, got 'x'"),
    ('-valid_loss desc', 12, "expected one field, then `,`, `asc` or `desc`, got 'desc'"),
    ('< 1', 0, "expected a field, got '<'"),
])
def test_malformed_sort_keys_are_refused(order_by, position, detail):
    message = (f'`order_by`: syntax error at position {position}: {detail}\n'
               f'  {order_by}\n  {" " * position}^')
    with pytest.raises(ValueError, match=f'^{re.escape(message)}$'):
        parse_order_by(order_by)


@pytest.mark.parametrize('kwargs, error, message', [
    ({'where': 3}, TypeError, '`where` must be a str, got 3 (int)'),
    ({'order_by': 3}, TypeError, '`order_by` must be a str or a sequence of str, got 3 (int)'),
    ({'limit': '10'}, TypeError, "`limit` must be an int or None, got '10' (str)"),
    ({'limit': -1}, ValueError, '`limit` must be >= 0, got -1'),
])
def test_arguments_of_the_wrong_type_or_value_are_refused(store, kwargs, error, message):
    with pytest.raises(error, match=f'^{re.escape(message)}$'):
        query(store, **kwargs)


def test_querying_a_missing_root_says_so(tmp_path):
    with pytest.raises(ValueError, match=re.escape(
            f"`root` has no results store: '{tmp_path / 'nope'}' does not exist")):
        query(tmp_path / 'nope')


# -------------------------------------------- against a plain Python reading
_OPS = {'=': lambda a, b: a == b, '!=': lambda a, b: a != b, '<': lambda a, b: a < b,
        '<=': lambda a, b: a <= b, '>': lambda a, b: a > b, '>=': lambda a, b: a >= b}


def _holds(row: RunRow, field: str, op: str, literal: float | str) -> bool:
    """What a comparison means: false when the run lacks the value, or the types differ."""
    value = row.value(field)
    if isinstance(value, bool):
        value = int(value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    if isinstance(value, str) != isinstance(literal, str):
        return False
    return _OPS[op](value, literal)


def _random_expression(rng: random.Random, depth: int) -> tuple[str, object]:
    """A random expression, as text and as a predicate over rows."""
    kind = rng.random()
    if depth > 0 and kind < 0.3:
        (a, fa), (b, fb) = _random_expression(rng, depth - 1), \
            _random_expression(rng, depth - 1)
        if rng.random() < 0.5:
            return f'({a} and {b})', lambda r: fa(r) and fb(r)
        return f'({a} or {b})', lambda r: fa(r) or fb(r)
    if depth > 0 and kind < 0.4:
        a, fa = _random_expression(rng, depth - 1)
        return f'not {a}', lambda r: not fa(r)
    op = rng.choice(list(_OPS))
    field, literal = rng.choice([
        ('loss', round(rng.random(), 1)), ('acc', round(rng.random(), 1)),
        ('best.loss', round(rng.random(), 1)), ('results.acc', round(rng.random(), 1)),
        ('config.lr', rng.choice([1e-4, 1e-3, 1e-2])), ('config.opt.name', 'adam'),
        ('config.depth', rng.choice([2, 3, '3'])), ('status', 'completed')])
    text = f"{field} {op} {literal!r}"
    return text, lambda r: _holds(r, field, op, literal)


def test_random_expressions_agree_with_a_python_reading(tmp_path):
    rng = random.Random(1234)
    with ResultsStore(tmp_path) as store:
        for i in range(40):
            run_id = f'run{i:02d}'
            store.start_run(run_id, run_id, {'lr': rng.choice([1e-4, 1e-3, 1e-2]),
                                             'opt': {'name': rng.choice(['adam', 'sgd'])},
                                             'depth': rng.choice([2, 3, '3', None])})
            metrics = {n: rng.choice([rng.random(), math.nan])
                       for n in ('loss', 'acc') if rng.random() < 0.8}
            if metrics:
                store.log_epoch_metrics(run_id, 10, 1, metrics)
            if rng.random() < 0.7:
                store.set_best(run_id, {'loss': rng.random()})
            if rng.random() < 0.5:
                store.update_results(run_id, {'acc': rng.random()})
            store.set_status(run_id, rng.choice(['completed', 'failed', 'running']))
        everything = store.runs()
        sizes = []
        for _ in range(300):
            text, predicate = _random_expression(rng, depth=3)
            expected = [r.run_id for r in everything if predicate(r)]
            assert ids(query(store, where=text)) == expected, text
            sizes.append(len(expected))
    # the expressions were not all trivial: many kept some runs and left others out
    assert sum(0 < n < len(everything) for n in sizes) > 150
