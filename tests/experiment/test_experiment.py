"""Tests of spt.Experiment: run files, statuses, resume, the recorder, sinks, HParams, errors."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.experiment.experiment import current_experiment
from tfsnippet.experiment.run_files import shared_git_state
from tfsnippet.experiment.sinks import SinkError
from tfsnippet.experiment.store import ResultsStore
from tfsnippet.scaffold.components.checkpointer import TrainingPreempted
from tfsnippet.scaffold.metrics.console import DefaultMetricFormatter
from tests.helpers.loops import Counter

REPO = Path(__file__).resolve().parents[2]


class Optimizer(spt.Config):
    lr = 0.1
    name = spt.ConfigField(str, 'adam', choices=['adam', 'sgd'])


class RunConfig(spt.Config):
    """Config of the test runs."""
    max_epoch = 2
    steps = 4
    optimizer = Optimizer


def run_loop(exp, lines, clock, counter=None, first_loss=0., style=None):
    """A small training loop inside `exp`: `steps` steps per epoch, a validation loss;
    each step runs `counter`'s step (a `Counter`).  With `style`, the metric values
    are computed by TensorFlow in that style."""
    params = [] if counter is None else [counter.var]
    value = float if style is None else style.computed(tf.identity)
    with spt.TrainLoop(params, max_epoch=exp.config.max_epoch, print_func=lines.append,
                       clock=clock) as loop:
        for epoch in loop.iter_epochs():
            for step in loop.iter_steps(range(exp.config.steps)):
                clock.advance(0.5)
                loop.collect_metrics(loss=value(first_loss + loop.step))
                if counter is not None:
                    counter.step()
            loop.collect_metrics(valid_loss=value(1. / epoch))
            loop.print_logs()
        loop.collect_results(test_acc=0.75)
    return loop


def read_json(path):
    return json.loads(Path(path).read_text(encoding='utf-8'))


# ------------------------------------------------------------------ files and status
def test_experiment_writes_config_command_versions_console_and_results(tmp_path, fake_clock):
    lines = []
    with spt.Experiment(RunConfig, root=tmp_path, name='first',
                        args=['--optimizer.lr', '0.5', '--max_epoch', '1']) as exp:
        assert current_experiment() is exp
        assert (exp.run_id, exp.run_dir, exp.status) == ('first', str(tmp_path / 'first'),
                                                         'running')
        assert exp.config.optimizer.lr == 0.5 and exp.config.max_epoch == 1
        print('to stdout')
        print('to stderr', file=sys.stderr)
        run_loop(exp, lines, fake_clock)
        exp.results.update({'n_params': 10}, extra=1.5)
    assert current_experiment() is None
    assert exp.status == 'completed'

    run_dir = tmp_path / 'first'
    assert read_json(run_dir / 'config.json') == {
        'max_epoch': 1, 'steps': 4, 'optimizer': {'lr': 0.5, 'name': 'adam'}}
    info = read_json(run_dir / 'run.json')
    assert info['run_id'] == 'first' and info['status'] == 'completed'
    assert info['argv'] == ['--optimizer.lr', '0.5', '--max_epoch', '1']
    assert info['command'] == shlex.join([sys.executable, *sys.argv])   # the command that ran
    assert info['versions']['tfsnippet'] == spt.__version__
    assert info['versions']['numpy'] == np.__version__
    assert info['versions']['tensorflow'] == tf.__version__
    assert set(info['versions']) >= {'tensorflow', 'keras', 'numpy', 'tfsnippet'}
    assert info['host'] and 'git_commit' in info and len(info['starts']) == 1
    console = (run_dir / 'console.log').read_text(encoding='utf-8')
    assert 'to stdout\n' in console and 'to stderr\n' in console
    assert read_json(run_dir / 'result.json') == {'test_acc': 0.75, 'n_params': 10.,
                                                  'extra': 1.5}
    assert (run_dir / 'checkpoint').is_dir()

    with ResultsStore(tmp_path, create=False) as store:
        row = store.get_run('first')
    assert row.status == 'completed'
    assert row.flat_config == {'max_epoch': 1, 'steps': 4, 'optimizer.lr': 0.5,
                               'optimizer.name': 'adam'}
    assert row.results == {'test_acc': 0.75, 'n_params': 10., 'extra': 1.5}
    assert row.best == {'valid_loss': 1.0}
    assert row.meta['argv'] == info['argv'] and row.meta['run_dir'] == str(run_dir)
    # the store keeps the status (and id, name) itself: no stale start-time copy in the meta
    assert not {'status', 'run_id', 'name'} & set(row.meta)


def test_git_commit_is_recorded_from_the_scripts_checkout_and_absent_without_git(
        tmp_path, monkeypatch):
    repo = tmp_path / 'repo'
    repo.mkdir()
    (repo / 'train.py').write_text('# a training script\n')
    git = ['git', '-c', 'user.name=t', '-c', 'user.email=t@example.com']
    subprocess.run(git + ['init', '-q'], cwd=repo, check=True, timeout=30)
    monkeypatch.setattr(sys, 'argv', [str(repo / 'train.py')])
    with spt.Experiment(RunConfig, root=tmp_path / 'runs', name='no-commit', args=[],
                        hparams=False) as exp:
        pass
    info = read_json(Path(exp.run_dir) / 'run.json')
    assert (info['git_commit'], info['git_dirty']) == (None, None)   # nothing committed yet
    for cmd in (['add', 'train.py'], ['commit', '-q', '-m', 'init']):
        subprocess.run(git + cmd, cwd=repo, check=True, timeout=30)
    sha = subprocess.run(['git', 'rev-parse', 'HEAD'], cwd=repo, stdout=subprocess.PIPE,
                         text=True, check=True, timeout=30).stdout.strip()
    monkeypatch.setattr(sys, 'argv', [str(repo / 'train.py')])
    with spt.Experiment(RunConfig, root=tmp_path / 'runs', name='git', args=[],
                        hparams=False) as exp:
        pass
    info = read_json(Path(exp.run_dir) / 'run.json')
    assert (info['git_commit'], info['git_dirty']) == (sha, False)

    # inside shared_git_state the runs record the first run's answer; outside, their own
    with shared_git_state():
        with spt.Experiment(RunConfig, root=tmp_path / 'runs', name='shared-1', args=[],
                            hparams=False) as exp1:
            (repo / 'train.py').write_text('# a training script, edited\n')
        with spt.Experiment(RunConfig, root=tmp_path / 'runs', name='shared-2', args=[],
                            hparams=False) as exp2:
            pass
    with spt.Experiment(RunConfig, root=tmp_path / 'runs', name='dirty', args=[],
                        hparams=False) as exp3:
        pass
    assert [(read_json(Path(e.run_dir) / 'run.json')['git_commit'],
             read_json(Path(e.run_dir) / 'run.json')['git_dirty'])
            for e in (exp1, exp2, exp3)] == [(sha, False), (sha, False), (sha, True)]

    monkeypatch.setenv('PATH', str(tmp_path / 'no-such-bin'))   # no git to run
    with spt.Experiment(RunConfig, root=tmp_path / 'runs', name='nogit', args=[],
                        hparams=False) as exp:
        pass
    info = read_json(Path(exp.run_dir) / 'run.json')
    assert (info['git_commit'], info['git_dirty'], info['status']) == (None, None, 'completed')


@pytest.mark.parametrize('raised, status', [
    (None, 'completed'),
    (ValueError('diverged'), 'failed'),
    (KeyboardInterrupt(), 'failed'),
    (TrainingPreempted(143), 'preempted'),
    (SystemExit(0), 'completed'),
    (SystemExit(1), 'failed'),
])
def test_status_follows_how_the_block_ends(tmp_path, raised, status):
    store = ResultsStore(tmp_path)
    exp = spt.Experiment(RunConfig, root=tmp_path, name='r', args=[], hparams=False)
    with pytest.raises(type(raised)) if raised is not None else _nothing():
        with exp:
            assert store.get_run('r').status == 'running'
            if raised is not None:
                raise raised
    assert exp.status == status
    assert store.get_run('r').status == status
    info = read_json(Path(exp.run_dir) / 'run.json')
    assert info['status'] == status
    assert info.get('error') == (f'{type(raised).__name__}: {raised}' if status == 'failed'
                                 else None)
    store.close()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_sigterm_preempts_the_loop_and_the_rerun_resumes_it(tmp_path, fake_clock):
    v = tf.Variable(0.)
    lines = []
    with pytest.raises(TrainingPreempted):
        with spt.Experiment(RunConfig, root=tmp_path, name='job',
                            args=['--max_epoch', '3']) as exp:
            with spt.TrainLoop([v], max_epoch=exp.config.max_epoch, print_func=lines.append,
                               clock=fake_clock) as loop:
                for _ in loop.iter_epochs():
                    for _ in loop.iter_steps(range(4)):
                        v.assign_add(1.)
                        loop.collect_metrics(loss=float(v.numpy()))
                        if loop.step == 6:
                            os.kill(os.getpid(), signal.SIGTERM)
                    loop.print_logs()
    with ResultsStore(tmp_path) as store:
        assert store.get_run('job').status == 'preempted'
        assert [e.epoch for e in store.epochs('job')] == [1]   # epoch 2 cut short, unprinted
    # TensorBoard's HParams has no "preempted": the run ends as STATUS_UNKNOWN, not an error
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2
    acc = EventAccumulator(exp.run_dir, size_guidance={'tensors': 0})
    acc.Reload()
    end = plugin_data_pb2.HParamsPluginData.FromString(
        acc.PluginTagToContent('hparams')['_hparams_/session_end_info']).session_end_info
    assert end.status == api_pb2.STATUS_UNKNOWN

    v.assign(-100.)
    lines.clear()
    with spt.Experiment(RunConfig, root=tmp_path, name='job', args=[], hparams=False) as exp:
        assert exp.resumed and exp.config.max_epoch == 3   # the saved config
        with spt.TrainLoop([v], max_epoch=exp.config.max_epoch, print_func=lines.append,
                           clock=fake_clock) as loop:
            assert (loop.epoch, loop.step, float(v.numpy())) == (2, 6, 6.)
            for _ in loop.iter_epochs():
                for _ in loop.iter_steps(range(4)):
                    v.assign_add(1.)
                    loop.collect_metrics(loss=float(v.numpy()))
                loop.print_logs()
    assert float(v.numpy()) == 12.
    assert any(line.startswith('Resume training: epoch 2, step 6') for line in lines)
    with ResultsStore(tmp_path) as store:
        row = store.get_run('job')
        assert (row.status, row.epoch, row.step) == ('completed', 3, 12)
        assert store.epochs('job')[-1].metrics['loss']['mean'] == 10.5   # steps 9..12


# ------------------------------------------------------------------ resume
def test_resume_by_name_reloads_the_config_and_applies_command_line_overrides(
        style, tmp_path, fake_clock):
    v = Counter(style)
    with spt.Experiment(RunConfig, root=tmp_path, name='r1',
                        args=['--optimizer.name', 'sgd', '--max_epoch', '1']) as exp:
        run_loop(exp, [], fake_clock, counter=v, style=style)
    assert float(v.value()) == 4.
    style.assign(v.var, -100.)        # the resume restores it

    lines = []
    with spt.Experiment(RunConfig, root=tmp_path, name='r1', args=['--max_epoch', '3']) as exp:
        assert exp.resumed
        assert (exp.config.optimizer.name, exp.config.max_epoch) == ('sgd', 3)
        assert exp.overrides == {'max_epoch': (1, 3)}
        loop = run_loop(exp, lines, fake_clock, counter=v, style=style)
    assert loop.epoch == 3 and float(v.value()) == 12.
    assert lines[0].startswith('Resume training: epoch 1, step 4')
    assert read_json(tmp_path / 'r1' / 'config.json')['max_epoch'] == 3
    starts = read_json(tmp_path / 'r1' / 'run.json')['starts']
    assert [s['argv'] for s in starts] == [['--optimizer.name', 'sgd', '--max_epoch', '1'],
                                           ['--max_epoch', '3']]
    assert starts[1]['overrides'] == {'max_epoch': [1, 3]}
    console = (tmp_path / 'r1' / 'console.log').read_text(encoding='utf-8')
    assert "Resuming run 'r1'" in console and 'max_epoch: 1 -> 3' in console
    with ResultsStore(tmp_path) as store:
        assert [e.epoch for e in store.epochs('r1')] == [1, 2, 3]
        assert len(store.runs()) == 1


def test_resume_flag_on_the_command_line_reloads_the_run(tmp_path, fake_clock):
    with spt.Experiment(RunConfig, root=tmp_path, args=['--steps', '2']) as exp:
        run_loop(exp, [], fake_clock)
    first_id = exp.run_id
    assert re.fullmatch(r'\d{8}-\d{6}-[0-9a-f]{6}', first_id)

    lines = []
    with spt.Experiment(RunConfig, root=tmp_path,
                        args=['--resume', first_id, '--max_epoch', '4']) as exp:
        assert (exp.run_id, exp.resumed, exp.config.steps) == (first_id, True, 2)
        loop = run_loop(exp, lines, fake_clock)
    assert (loop.epoch, loop.step) == (4, 8)
    assert lines[0].startswith('Resume training: epoch 2, step 4')


# ------------------------------------------------------------------ the loop recorder
def test_recorded_epochs_are_the_statistics_the_log_lines_print(style, tmp_path, fake_clock):
    lines = []
    with spt.Experiment(RunConfig, root=tmp_path, name='stats', args=['--max_epoch', '3'],
                        hparams=False) as exp:
        run_loop(exp, lines, fake_clock, first_loss=0.25, style=style)
    printed = [line for line in lines if line.startswith('[Epoch')]
    with ResultsStore(tmp_path) as store:
        epochs = store.epochs('stats')
    assert [(e.epoch, e.step) for e in epochs] == [(1, 4), (2, 8), (3, 12)]
    fmt = DefaultMetricFormatter()
    for line, row in zip(printed, epochs):
        assert set(row.metrics) == {'loss', 'valid_loss', 'step_time', 'epoch_time'}
        for name, stats in row.metrics.items():
            text = f'{name.replace("_", " ")}: {fmt.format_metric(name, stats["mean"])}'
            if stats['count'] > 1:
                text += f' (±{fmt.format_metric(name, stats["std"])})'
            assert text in line, (text, line)
    assert epochs[0].metrics['loss'] == {'mean': 2.75, 'std': pytest.approx(np.std([1, 2, 3, 4])),
                                         'count': 4}


def test_epochs_are_buffered_and_written_every_flush_secs_on_the_loops_clock(
        tmp_path, fake_clock):
    store = ResultsStore(tmp_path)
    seen = []
    with spt.Experiment(RunConfig, root=tmp_path, name='buf', args=['--max_epoch', '5'],
                        flush_secs=5., hparams=False) as exp:
        with spt.TrainLoop([], max_epoch=5, print_func=lambda s: None,
                           clock=fake_clock) as loop:
            for _ in loop.iter_epochs():
                for _ in loop.iter_steps(range(3)):
                    loop.collect_metrics(loss=1.)
                fake_clock.advance(2.)   # 2 s an epoch: a write after epochs 3 and 5
                loop.print_logs()
                seen.append(len(store.epochs('buf')))
            seen.append(len(store.epochs('buf')))
        seen.append(len(store.epochs('buf')))
    assert seen == [0, 0, 0, 3, 3, 3, 5]   # epoch 5's write comes after AFTER_EPOCH
    store.close()


def test_a_loop_that_fails_to_be_made_leaves_the_run_checkpoint_dir_to_the_next(tmp_path):
    v = tf.Variable(0.)
    with spt.Experiment(RunConfig, root=tmp_path, name='retry', args=[], hparams=False) as exp:
        with pytest.raises(ValueError, match='`early_stopping=True` needs a `valid_metric_name`'):
            spt.TrainLoop([v], early_stopping=True, valid_metric_name=None)
        with spt.TrainLoop([v], max_epoch=1, print_func=lambda s: None) as loop:
            pass
        assert loop.component('checkpointer').checkpoint_dir == exp.checkpoint_dir


def test_epochs_without_a_printed_line_record_their_own_values(tmp_path, fake_clock):
    with spt.Experiment(RunConfig, root=tmp_path, name='quiet', args=['--max_epoch', '3'],
                        hparams=False) as exp:
        with spt.TrainLoop([], max_epoch=3, print_func=lambda s: None, clock=fake_clock) as loop:
            for epoch in loop.iter_epochs():
                for _ in loop.iter_steps(range(4)):
                    loop.collect_metrics(loss=10. * epoch + loop.step)
                loop.collect_metrics(valid_loss=1. / epoch)
    with ResultsStore(tmp_path) as store:
        epochs = store.epochs('quiet')
    assert [e.epoch for e in epochs] == [1, 2, 3]
    for row in epochs:
        losses = [10. * row.epoch + s for s in range(row.step - 3, row.step + 1)]
        assert row.metrics['loss']['count'] == 4
        assert row.metrics['loss']['mean'] == pytest.approx(np.mean(losses))
        assert row.metrics['loss']['std'] == pytest.approx(np.std(losses), abs=1e-6)
        assert row.metrics['valid_loss']['mean'] == pytest.approx(1. / row.epoch)
        assert row.metrics['valid_loss']['count'] == 1


def test_only_the_first_loop_checkpoints_into_the_run_dir_and_every_loop_records(
        tmp_path, fake_clock):
    with spt.Experiment(RunConfig, root=tmp_path, name='two', args=[], hparams=False) as exp:
        with spt.TrainLoop([], max_epoch=1, print_func=lambda s: None) as first:
            pass
        with spt.TrainLoop([], max_epoch=1, print_func=lambda s: None) as second:
            pass
        assert first.component('checkpointer').checkpoint_dir == exp.checkpoint_dir
        assert second.component('checkpointer') is None
        assert first.component('run_recorder').target is exp
        assert second.component('run_recorder').target is exp
    with spt.Experiment(RunConfig, root=tmp_path, name='off', args=[], hparams=False,
                        auto_checkpoint=False) as exp:
        with spt.TrainLoop([], max_epoch=1, print_func=lambda s: None) as loop:
            assert loop.component('checkpointer') is None
        late = spt.TrainLoop([], max_epoch=1, print_func=lambda s: None)
    with late:   # made inside, entered after the block: records nowhere, raises nothing
        for _ in late.iter_epochs():
            late.collect_metrics(valid_loss=1.)
        late.collect_results(test_loss=1.)
    assert not exp.active and dict(exp.results) == {}
    with spt.TrainLoop([], max_epoch=1) as outside:   # no Experiment: nothing added
        assert outside.component('run_recorder') is None


# ------------------------------------------------------------------ sinks
class RecordingSink:
    def __init__(self, fail_in=None):
        self.calls = []
        self.fail_in = fail_in

    def _record(self, *call):
        self.calls.append(call)
        if call[0] == self.fail_in:
            raise ConnectionError('tracking server gone')

    def start(self, run_id, name, config, info):
        self._record('start', run_id, name, dict(config), sorted(info))

    def log_epoch(self, step, epoch, metrics):
        self._record('log_epoch', step, epoch, dict(metrics))

    def log_best(self, values):
        self._record('log_best', dict(values))

    def log_results(self, values):
        self._record('log_results', dict(values))

    def finish(self, status):
        self._record('finish', status)


def test_sinks_get_start_epoch_means_best_results_and_finish(tmp_path, fake_clock):
    sink = RecordingSink()
    with spt.Experiment(RunConfig, root=tmp_path, name='s', args=['--steps', '2'],
                        sinks=[sink], flush_secs=0., hparams=False) as exp:
        run_loop(exp, [], fake_clock)
    kinds = [c[0] for c in sink.calls]
    assert kinds == ['start', 'log_epoch', 'log_best', 'log_epoch', 'log_best', 'log_results',
                     'finish']
    start = sink.calls[0]
    assert start[1:4] == ('s', 's', {'max_epoch': 2, 'steps': 2,
                                     'optimizer': {'lr': 0.1, 'name': 'adam'}})
    assert {'host', 'argv', 'versions', 'git_commit', 'run_dir', 'resumed'} <= set(start[4])
    assert sink.calls[1][:3] == ('log_epoch', 2, 1)
    assert sink.calls[1][3] == {'loss': 1.5, 'valid_loss': 1., 'step_time': 0.5,
                                'epoch_time': 1.}
    assert sink.calls[4] == ('log_best', {'valid_loss': 0.5})
    assert sink.calls[5] == ('log_results', {'test_acc': 0.75})
    assert sink.calls[6] == ('finish', 'completed')


def test_a_failing_sink_is_reported_once_and_training_goes_on(tmp_path, fake_clock):
    bad, good = RecordingSink(fail_in='log_epoch'), RecordingSink()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with spt.Experiment(RunConfig, root=tmp_path, name='f', args=[], sinks=[bad, good],
                            flush_secs=0., hparams=False) as exp:
            loop = run_loop(exp, [], fake_clock)
    assert loop.epoch == 2
    messages = [str(w.message) for w in caught if issubclass(w.category, SinkError)]
    assert len(messages) == 1
    assert messages[0].startswith(f'The run sink {bad!r} failed in `log_epoch()` and is not '
                                  'called again in this run (training goes on): '
                                  'ConnectionError: tracking server gone')
    assert [c[0] for c in bad.calls] == ['start', 'log_epoch', 'finish']
    assert [c[0] for c in good.calls].count('log_epoch') == 2
    with ResultsStore(tmp_path) as store:
        assert store.get_run('f').status == 'completed'


# ------------------------------------------------------------------ TensorBoard HParams
def test_hparams_and_final_metrics_are_read_back_by_tensorboard(tmp_path, fake_clock):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2

    with spt.Experiment(RunConfig, root=tmp_path, name='hp',
                        args=['--optimizer.lr', '0.01']) as exp:
        run_loop(exp, [], fake_clock)
    acc = EventAccumulator(exp.run_dir, size_guidance={'tensors': 0, 'scalars': 0})
    acc.Reload()
    content = acc.PluginTagToContent('hparams')
    assert sorted(content) == ['_hparams_/session_end_info', '_hparams_/session_start_info']
    start = plugin_data_pb2.HParamsPluginData.FromString(
        content['_hparams_/session_start_info']).session_start_info
    hparams = {k: v.WhichOneof('kind') and getattr(v, v.WhichOneof('kind'))
               for k, v in start.hparams.items()}
    assert hparams == {'max_epoch': 2., 'steps': 4., 'optimizer.lr': 0.01,
                       'optimizer.name': 'adam'}
    assert start.group_name == 'hp'
    end = plugin_data_pb2.HParamsPluginData.FromString(
        content['_hparams_/session_end_info']).session_end_info
    assert end.status == api_pb2.STATUS_SUCCESS
    scalars = {tag: [(e.step, e.value) for e in acc.Scalars(tag)]
               for tag in acc.Tags()['scalars']}
    assert scalars == {'results/test_acc': [(8, 0.75)], 'best/valid_loss': [(8, 0.5)]}


# ------------------------------------------------------------------ several workers, killed runs
def _run_script(server, tmp_path, source, env_extra, timeout=120):
    """A run of `source`, forked by `server` (the session's ``fork_server``)."""
    script = tmp_path / 'script.py'
    script.write_text(textwrap.dedent(source))
    env = dict(os.environ, PYTHONPATH=str(REPO), **env_extra)
    return server.run([script], cwd=tmp_path, env=env, timeout=timeout,
                      stderr_to_stdout=True)


CHIEF_SCRIPT = """
    from tfsnippet.experiment import Config, Experiment

    class RunConfig(Config):
        lr = 0.1

    with Experiment(RunConfig, root='runs', name='job', args=['--lr', '0.5']) as exp:
        assert exp.config.lr == 0.5
        exp.log_epochs([(10, 1, {'loss': {'mean': 1.0, 'std': 0.0, 'count': 10}})],
                       {'loss': 1.0})
        exp.results.update(test_acc=0.5)
        print('is_chief', exp.is_chief, 'store', exp.store is not None)
"""


def test_only_the_chief_writes_under_multi_worker_training(tmp_path, fork_server):
    cluster = {'chief': ['127.0.0.1:1'], 'worker': ['127.0.0.1:2']}
    worker = json.dumps({'cluster': cluster, 'task': {'type': 'worker', 'index': 0}})
    proc = _run_script(fork_server, tmp_path, CHIEF_SCRIPT, {'TF_CONFIG': worker})
    assert proc.returncode == 0, proc.stdout
    assert 'is_chief False store False' in proc.stdout
    assert not (tmp_path / 'runs').exists()

    chief = json.dumps({'cluster': cluster, 'task': {'type': 'chief', 'index': 0}})
    proc = _run_script(fork_server, tmp_path, CHIEF_SCRIPT, {'TF_CONFIG': chief})
    assert proc.returncode == 0, proc.stdout
    assert 'is_chief True store True' in proc.stdout
    with ResultsStore(tmp_path / 'runs', create=False) as store:
        row = store.get_run('job')
    assert (row.status, row.results, row.best) == ('completed', {'test_acc': 0.5},
                                                   {'loss': 1.0})


KILLED_SCRIPT = """
    import os, signal
    from tfsnippet.experiment import Config, Experiment

    class RunConfig(Config):
        lr = 0.1

    with Experiment(RunConfig, root='runs', name='killed', args=[], hparams=False) as exp:
        exp.log_epochs([(10, 1, {'loss': {'mean': 1.0, 'std': 0.0, 'count': 10}})])
        os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_run_shows_as_stale_with_what_it_recorded(tmp_path, fake_clock,
                                                          fork_server):
    proc = _run_script(fork_server, tmp_path, KILLED_SCRIPT, {})
    assert proc.returncode == -signal.SIGKILL, proc.stdout
    with ResultsStore(tmp_path / 'runs', stale_after=600.) as store:
        assert store.get_run('killed').status == 'running'   # not stale yet
    later = ResultsStore(tmp_path / 'runs', stale_after=600.,
                         clock=lambda: fake_clock() + 2e9)   # far in the future
    row = later.get_run('killed')
    assert (row.status, row.epoch, row.metrics) == ('stale', 1, {'loss': 1.0})
    later.close()


# ------------------------------------------------------------------ bad input
def test_a_saved_config_that_no_longer_matches_the_class_is_refused(tmp_path):
    with spt.Experiment(RunConfig, root=tmp_path, name='old', args=[], hparams=False):
        pass
    saved = read_json(tmp_path / 'old' / 'config.json')
    saved['momentum'] = 0.9
    del saved['steps'], saved['optimizer']   # a section left out is named once
    (tmp_path / 'old' / 'config.json').write_text(json.dumps(saved))
    path = str(tmp_path / 'old' / 'config.json')
    with pytest.raises(ValueError, match=re.escape(
            f"Cannot resume run 'old': its saved config {path!r} no longer matches RunConfig: "
            f"the class has no field `momentum`; the saved config has no `optimizer`, `steps`. "
            f"Start a new run (another `name`), or edit the saved config")):
        spt.Experiment(RunConfig, root=tmp_path, name='old', args=[])


def test_an_unwritable_root_is_refused_when_entered(tmp_path):
    root = tmp_path / 'a-file'
    root.write_text('not a directory')
    exp = spt.Experiment(RunConfig, root=root, name='r', args=[])
    with pytest.raises(ValueError, match=re.escape(
            f'`root` is not a writable directory: {str(root)!r} is a file')):
        with exp:
            pass   # pragma: no cover
    assert current_experiment() is None


def test_resume_of_an_unknown_run_id_names_the_close_ones(tmp_path, capsys):
    with spt.Experiment(RunConfig, root=tmp_path, name='lr-0.1', args=[], hparams=False):
        pass
    capsys.readouterr()
    # an option error like the others: usage and message on stderr, exit status 2
    with pytest.raises(SystemExit) as e:
        spt.Experiment(RunConfig, root=tmp_path, args=['--resume', 'lr-0.2'])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith('usage: ')
    assert err.endswith(
        f"error: `--resume`: no run 'lr-0.2' in {str(tmp_path)!r} (no lr-0.2/config.json); "
        f"close matches: lr-0.1\n")
    with pytest.raises(SystemExit) as e:
        spt.Experiment(RunConfig, root=tmp_path, args=['--resume', '../up'])
    assert e.value.code == 2
    assert 'error: `--resume` must be a run id of letters' in capsys.readouterr().err


def test_a_malformed_run_name_is_refused(tmp_path):
    with pytest.raises(ValueError, match=re.escape(
            '`name` must be a run id of letters, digits, ".", "_" and "-" (not starting with '
            '"." or "-"), got \'../escape\'')):
        spt.Experiment(RunConfig, root=tmp_path, name='../escape', args=[])
