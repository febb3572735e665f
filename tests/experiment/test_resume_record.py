"""A failed resume leaves the run's record as it was; `run.json` keeps the real command line;
HParams and results after a resume."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest
import tensorflow as tf

import tfsnippet as spt


class NetConfig(spt.Config):
    """Config whose `hidden` sets a variable's shape."""
    hidden = 2
    max_epoch = 1


def train(exp, clock, lines=None, style=None):
    """Two epochs of two steps adding 1 to ``w``; its values at the end (a list).
    `style`: the TF style of ``w`` and its update (eager without one)."""
    if style is None:
        w = tf.Variable(tf.zeros([exp.config.hidden]), name='w')
        step = lambda: w.assign_add(tf.ones_like(w))
    else:
        w = style.variable([0.] * exp.config.hidden, 'w')
        step = style.updater(w, [1.] * exp.config.hidden)
    with spt.TrainLoop([w], max_epoch=exp.config.max_epoch, clock=clock,
                       print_func=(lines if lines is not None else []).append) as loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                step()
                loop.collect_metrics(loss=1.)
            loop.collect_metrics(valid_loss=1. / loop.epoch)
            loop.print_logs()
        return (w.numpy() if style is None else style.value(w)).tolist()


def record_of(root: Path) -> dict[str, object]:
    """Every file of the run directory (bytes) and every row of the store."""
    files = {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob('*'))
             if p.is_file() and p.name != 'results.sqlite' and
             not p.name.startswith('results.sqlite')}
    with sqlite3.connect(root / 'results.sqlite') as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        rows = {t: sorted(map(repr, db.execute(f'SELECT * FROM {t}'))) for t in tables}
    return {'files': files, 'rows': rows}


def test_a_failed_resume_leaves_the_run_as_it_was_and_names_the_saved_value(
        style, tmp_path, fake_clock):
    with style.new_run(), spt.Experiment(NetConfig, root=tmp_path, name='lr-0.001',
                                         args=[]) as exp:
        train(exp, fake_clock, style=style)
    before = record_of(tmp_path)
    assert 'lr-0.001/config.json' in before['files']

    # the checkpoint cannot take hidden=3: the loop's restore fails
    with pytest.raises(ValueError, match="shape") as info, style.new_run(), spt.Experiment(
            NetConfig, root=tmp_path,
            args=['--resume', 'lr-0.001', '--hidden', '3', '--max_epoch', '2']) as exp:
        train(exp, fake_clock, style=style)
    notes = ' '.join(getattr(info.value, '__notes__', []))
    assert "run 'lr-0.001' failed before the loop restored its checkpoint: the run is left as it was" in notes
    assert 'hidden: 2 -> 3' in notes and '(--hidden 2 --max_epoch 1)' in notes
    assert record_of(tmp_path) == before   # files and store rows byte-identical

    # the plain resume still works, and is recorded
    with style.new_run(), spt.Experiment(NetConfig, root=tmp_path,
                                         args=['--resume', 'lr-0.001', '--max_epoch', '2']) as exp:
        w = train(exp, fake_clock, style=style)
    assert w == [4., 4.]
    run = json.loads((tmp_path / 'lr-0.001' / 'run.json').read_text())
    assert run['status'] == 'completed' and len(run['starts']) == 2
    assert json.loads((tmp_path / 'lr-0.001' / 'config.json').read_text())['max_epoch'] == 2
    console = (tmp_path / 'lr-0.001' / 'console.log').read_text()
    assert console.count("Resuming run 'lr-0.001'") == 1   # the failed one is not in it


def test_a_resume_is_recorded_once_the_loop_has_restored_its_checkpoint(tmp_path, fake_clock):
    with spt.Experiment(NetConfig, root=tmp_path, name='r', args=[]) as exp:
        train(exp, fake_clock)
    before = record_of(tmp_path)
    seen = {}
    with spt.Experiment(NetConfig, root=tmp_path, name='r', args=['--max_epoch', '2']) as exp:
        seen['before the loop'] = record_of(tmp_path) == before
        w = tf.Variable(tf.zeros([2]), name='w')
        with spt.TrainLoop([w], max_epoch=2, clock=fake_clock, print_func=lambda s: None):
            seen['in the loop'] = json.loads(
                (tmp_path / 'r' / 'run.json').read_text())['status']
    assert seen == {'before the loop': True, 'in the loop': 'running'}


def test_run_json_command_is_the_command_line_that_ran(tmp_path, fake_clock, monkeypatch):
    monkeypatch.setattr(sys, 'argv', ['train.py', '--root', 'runs', '--name', 'x',
                                      '--hidden', '4'])
    with spt.Experiment(NetConfig, root=tmp_path, args=['--hidden', '4']):
        pass
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    command = json.loads((run_dir / 'run.json').read_text())['command']
    assert command.endswith('train.py --root runs --name x --hidden 4')


def read_hparams(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2
    acc = EventAccumulator(str(run_dir), size_guidance={'tensors': 0, 'scalars': 0})
    acc.Reload()
    start = plugin_data_pb2.HParamsPluginData.FromString(
        acc.PluginTagToContent('hparams')['_hparams_/session_start_info']).session_start_info
    hparams = {k: getattr(v, v.WhichOneof('kind')) for k, v in start.hparams.items()}
    scalars = {tag: [(e.step, e.value) for e in acc.Scalars(tag)]
               for tag in acc.Tags()['scalars']}
    return hparams, scalars


def test_hparams_show_the_resumed_config_and_keep_the_results(tmp_path, fake_clock):
    with spt.Experiment(NetConfig, root=tmp_path, name='hp', args=[]) as exp:
        train(exp, fake_clock)
        exp.results.update(test_acc=0.5)
    with spt.Experiment(NetConfig, root=tmp_path, name='hp', args=['--max_epoch', '3']) as exp:
        train(exp, fake_clock)
    hparams, scalars = read_hparams(tmp_path / 'hp')
    assert hparams == {'hidden': 2., 'max_epoch': 3.}
    assert scalars == {'best/valid_loss': [(6, pytest.approx(1. / 3))],
                       'results/test_acc': [(6, 0.5)]}


def test_a_rerun_of_a_finished_run_logs_its_results_at_the_last_step(tmp_path, fake_clock):
    with spt.Experiment(NetConfig, root=tmp_path, name='done', args=[]) as exp:
        train(exp, fake_clock)
    lines = []
    with spt.Experiment(NetConfig, root=tmp_path, name='done', args=[]) as exp:
        train(exp, fake_clock, lines)
        exp.results.update(test_acc=0.25)
    assert any(line.startswith('Training has already finished') for line in lines)
    _, scalars = read_hparams(tmp_path / 'done')
    assert scalars == {'best/valid_loss': [(2, 1.)], 'results/test_acc': [(2, 0.25)]}
