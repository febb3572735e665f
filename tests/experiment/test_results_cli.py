"""Tests of ``python -m tfsnippet.results``: in-process through `main(argv)`, and as a command."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tfsnippet.experiment.store import ResultsStore
from tfsnippet.results.cli import format_table, format_value, main

REPO = Path(__file__).resolve().parents[2]
PROG = 'python -m tfsnippet.results'


@pytest.fixture
def root(tmp_path, fake_clock):
    """Three runs: two completed, one marked running whose heartbeat (fake clock, 1970) is stale."""
    with ResultsStore(tmp_path, clock=fake_clock) as s:
        s.start_run('r1', 'base', {'optimizer': {'name': 'adam', 'lr': 0.001}, 'seed': 1},
                    {'host': 'node-1'})
        s.log_epochs('r1', [(100, 1, {'valid_loss': 0.5, 'loss': 0.75}),
                            (200, 2, {'valid_loss': 0.25, 'loss': 0.5})])
        s.set_best('r1', {'valid_loss': 0.25})
        s.update_results('r1', {'test_acc': 0.9})
        s.set_status('r1', 'completed')
        fake_clock.advance(1.)
        s.start_run('r2', 'fast', {'optimizer': {'name': 'adam', 'lr': 0.01}, 'seed': 1})
        s.log_epoch_metrics('r2', 100, 1, {'valid_loss': 0.125, 'loss': 0.25})
        s.set_best('r2', {'valid_loss': 0.125})
        s.set_status('r2', 'completed')
        fake_clock.advance(1.)
        s.start_run('r3', 'wip', {'optimizer': {'name': 'sgd', 'lr': 0.01}, 'seed': 2,
                                  'extra': True})
        s.log_epoch_metrics('r3', 100, 1, {'valid_loss': 2.0})
    return tmp_path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


# ------------------------------------------------------------ formatting
@pytest.mark.parametrize('value, text', [
    (None, '-'), (0.1, '0.1'), (1 / 3, '0.333333'), (1234567.0, '1.23457e+06'),
    (float('nan'), 'nan'), (3, '3'), (True, 'True'), ('adam', 'adam'), ([1, 2], '[1, 2]'),
])
def test_format_value(value, text):
    assert format_value(value) == text


def test_format_table_aligns_text_left_and_numbers_right():
    assert format_table(['run', 'loss', 'ok'], [['a', 0.5, True], ['bbbb', 12, None]]) == [
        'run   loss  ok',
        '----  ----  ----',
        'a      0.5  True',
        'bbbb    12  -',
    ]


# ------------------------------------------------------------------ list
def test_list_shows_one_line_per_run_with_best_values(root, capsys):
    status, out, err = run(capsys, root, 'list')
    assert (status, err) == (0, '')
    assert out.splitlines() == [
        'run_id  name  status     epoch  best.valid_loss',
        '------  ----  ---------  -----  ---------------',
        'r1      base  completed      2             0.25',
        'r2      fast  completed      1            0.125',
        'r3      wip   stale          1                -',
        '(3 runs)',
    ]


def test_list_filters_sorts_and_shows_the_fields_it_used(root, capsys):
    status, out, _ = run(capsys, root, 'list', '--where', 'config.optimizer.lr >= 0.01',
                         '--order-by=-valid_loss')
    assert status == 0
    assert out.splitlines() == [
        'run_id  name  status     epoch  config.optimizer.lr  valid_loss  best.valid_loss',
        '------  ----  ---------  -----  -------------------  ----------  ---------------',
        'r3      wip   stale          1                 0.01           2                -',
        'r2      fast  completed      1                 0.01       0.125            0.125',
        '(2 runs)',
    ]


def test_list_with_columns_and_a_limit(root, capsys):
    status, out, _ = run(capsys, root, 'list', '--columns', 'metrics.loss,results.test_acc',
                         '--order-by', 'loss desc', '--limit', '1')
    assert status == 0
    assert out.splitlines() == [
        'run_id  name  status     epoch  metrics.loss  results.test_acc',
        '------  ----  ---------  -----  ------------  ----------------',
        'r1      base  completed      2           0.5               0.9',
        '(1 run)',
    ]


def test_list_refuses_an_unknown_column(root, capsys):
    status, out, err = run(capsys, root, 'list', '--columns', 'loss,valid_los')
    assert (status, out) == (2, '')
    assert err == (f"{PROG}: error: `--columns`: unknown field 'valid_los': no run in "
                   f"'{root / 'results.sqlite'}' has it; close matches: valid_loss, "
                   f"best.valid_loss\n")


# ------------------------------------------------------------------ show
def test_show_prints_everything_about_a_run(root, capsys):
    status, out, _ = run(capsys, root, 'show', 'r1', '--epochs')
    assert status == 0
    lines = out.splitlines()
    assert lines[:3] == ['run_id     r1', 'name       base', 'status     completed']
    assert lines[3].startswith('created    1970-01-01T00:16:40+00:00')
    assert lines[6] == 'epoch      2 (step 200)'
    assert lines[7:] == [
        '',
        'config',
        '  optimizer.lr    0.001',
        '  optimizer.name  adam',
        '  seed            1',
        '',
        'meta',
        '  host  node-1',
        '',
        'metrics',
        '  loss        0.5',
        '  test_acc    0.9',
        '  valid_loss  0.25',
        '',
        'best',
        '  valid_loss  0.25',
        '',
        'results',
        '  test_acc  0.9',
        '',
        'epochs (means)',
        '  epoch  step  loss  valid_loss',
        '  -----  ----  ----  ----------',
        '      1   100  0.75         0.5',
        '      2   200   0.5        0.25',
    ]


def test_show_without_epochs_says_how_many_and_how_to_see_them(root, capsys):
    status, out, _ = run(capsys, root, 'show', 'r1')
    assert status == 0
    assert out.splitlines()[-2:] == [
        '', 'epochs: 2 recorded (`--epochs` shows the mean of each metric at each epoch)']
    assert 'epochs (means)' not in out


def test_show_leaves_out_the_start_time_copies_and_shows_times_as_dates(tmp_path, fake_clock,
                                                                        capsys):
    # what stores written before the fix hold in the meta: a copy of the status
    # as it was at the start, and the start time in seconds
    with ResultsStore(tmp_path, clock=fake_clock) as s:
        s.start_run('r1', 'base', {'seed': 1},
                    {'run_id': 'r1', 'name': 'base', 'status': 'running', 'host': 'node-1',
                     'started': 1795710000.5, 'starts': [{'time': 1795700000.0},
                                                         {'time': 1795710000.5}]})
        s.set_status('r1', 'completed')
    status, out, _ = run(capsys, tmp_path, 'show', 'r1')
    assert status == 0
    lines = out.splitlines()
    assert [line for line in lines if 'status' in line] == ['status     completed']
    meta = lines[lines.index('meta') + 1:lines.index('metrics') - 1]
    assert meta == ['  host     node-1',
                    '  started  2026-11-26T16:20:00+00:00',
                    '  starts   2026-11-26T13:33:20+00:00, 2026-11-26T16:20:00+00:00']


# --------------------------------------------------------------- compare
def test_compare_shows_differing_config_then_metrics_side_by_side(root, capsys):
    status, out, _ = run(capsys, root, 'compare', 'r1', 'r2', 'r3')
    assert status == 0
    assert out.splitlines() == [
        'config (fields that differ)',
        '  field           r1     r2    r3',
        '  --------------  -----  ----  ----',
        '  extra               -     -  True',
        '  optimizer.lr    0.001  0.01  0.01',
        '  optimizer.name  adam   adam  sgd',
        '  seed                1     1     2',
        '',
        'metrics',
        '  field             r1         r2         r3',
        '  ----------------  ---------  ---------  -----',
        '  name              base       fast       wip',
        '  status            completed  completed  stale',
        '  epoch                     2          1      1',
        '  loss                    0.5       0.25      -',
        '  test_acc                0.9          -      -',
        '  valid_loss             0.25      0.125      2',
        '  best.valid_loss        0.25      0.125      -',
        '  results.test_acc        0.9          -      -',
    ]


def test_compare_says_when_configs_are_the_same(root, capsys):
    status, out, _ = run(capsys, root, 'compare', 'r1', 'r1')
    assert status == 0
    assert out.splitlines()[:2] == ['config (fields that differ)',
                                    '  (none: the configs are the same)']


# ---------------------------------------------------------------- export
def test_export_writes_one_csv_row_per_run(root, capsys):
    status, out, _ = run(capsys, root, 'export', '--csv')
    assert status == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == [
        'run_id', 'name', 'status', 'created', 'heartbeat', 'ended', 'epoch', 'step',
        'config.extra', 'config.optimizer.lr', 'config.optimizer.name', 'config.seed',
        'metrics.loss', 'metrics.test_acc', 'metrics.valid_loss', 'best.valid_loss',
        'results.test_acc']
    assert [r['run_id'] for r in rows] == ['r1', 'r2', 'r3']
    assert rows[0]['created'] == '1970-01-01T00:16:40+00:00'
    assert (rows[0]['config.optimizer.lr'], rows[0]['metrics.valid_loss'],
            rows[0]['results.test_acc'], rows[0]['config.extra']) == ('0.001', '0.25', '0.9', '')
    assert (rows[2]['status'], rows[2]['ended'], rows[2]['config.extra']) == \
        ('stale', '', 'True')


def test_export_to_a_file_with_a_filter(root, capsys, tmp_path):
    target = tmp_path / 'out.csv'
    status, out, err = run(capsys, root, 'export', '--csv', target, '--where',
                           "status = 'completed'", '--order-by=-valid_loss')
    assert (status, out, err) == (0, '', f'wrote 2 runs to {target}\n')
    with open(target, newline='', encoding='utf-8') as f:
        assert [r['run_id'] for r in csv.DictReader(f)] == ['r1', 'r2']


# ---------------------------------------------------------------- errors
def test_an_unknown_run_exits_with_status_2(root, capsys):
    status, out, err = run(capsys, root, 'show', 'r11')
    assert (status, out) == (2, '')
    assert err == (f"{PROG}: error: `run_id`: no run 'r11' in "
                   f"'{root / 'results.sqlite'}'; close matches: r1\n")


def test_an_unknown_run_in_compare_exits_with_status_2(root, capsys):
    status, _, err = run(capsys, root, 'compare', 'r1', 'nope')
    assert status == 2
    assert err == f"{PROG}: error: `run_id`: no run 'nope' in '{root / 'results.sqlite'}'\n"


def test_a_missing_root_exits_with_status_2(tmp_path, capsys):
    status, out, err = run(capsys, tmp_path / 'nowhere', 'list')
    assert (status, out) == (2, '')
    assert err == (f"{PROG}: error: `root` has no results store: "
                   f"'{tmp_path / 'nowhere'}' does not exist\n")
    assert not (tmp_path / 'nowhere').exists()


def test_a_bad_expression_exits_with_status_2(root, capsys):
    status, out, err = run(capsys, root, 'list', '--where', 'valid_loss <')
    assert (status, out) == (2, '')
    assert err == (f'{PROG}: error: `where`: syntax error at position 12: expected a number '
                   f'or a quoted string, got the end of the expression\n'
                   f'  valid_loss <\n'
                   f'              ^\n')


def test_compare_needs_two_runs(root, capsys):
    status, _, err = run(capsys, root, 'compare', 'r1')
    assert status == 2
    assert err.splitlines()[-1] == f'{PROG}: error: compare needs two runs or more, got 1'


def test_a_bad_command_line_exits_with_status_2(root, capsys):
    status, _, err = run(capsys, root, 'export')
    assert status == 2
    assert 'the following arguments are required: --csv' in err


# ------------------------------------------------------------ as a command
def _command(*argv: object) -> subprocess.CompletedProcess:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', PYTHONIOENCODING='utf-8')
    return subprocess.run([sys.executable, '-m', 'tfsnippet.results', *map(str, argv)],
                          cwd=str(REPO), env=env, capture_output=True, text=True, timeout=300)


def test_the_command_lists_runs(root):
    proc = _command(root, 'list', '--where', 'valid_loss < 1', '--order-by', 'name')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        'run_id  name  status     epoch  valid_loss  best.valid_loss',
        '------  ----  ---------  -----  ----------  ---------------',
        'r1      base  completed      2        0.25             0.25',
        'r2      fast  completed      1       0.125            0.125',
        '(2 runs)',
    ]


def test_the_command_fails_with_status_2_on_a_bad_field(root):
    proc = _command(root, 'list', '--where', 'valid_los < 1')
    assert (proc.returncode, proc.stdout) == (2, '')
    assert proc.stderr.splitlines()[-3:] == [
        f"{PROG}: error: `where`: unknown field `valid_los` at position 0: no run in "
        f"'{root / 'results.sqlite'}' has it; close matches: valid_loss, best.valid_loss",
        '  valid_los < 1',
        '  ^',
    ]
