"""A URL whose protocol part is malformed (``s3:/bucket/run``, ``s3:bucket``,
``s3//bucket``) is refused by every argument that takes a location, naming the
argument and the URL meant, and nothing is written; local paths that merely
look alike (``./s3/x``, ``s3/x``, ``C:\\x``, ``run-12:40``) stay local."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.experiment import Experiment, ResultsStore
from tfsnippet.results.cli import main as results_main
from tfsnippet.scaffold.checkpoint.export import check_export_path
from tfsnippet.scaffold.checkpoint.store import CheckpointStore
from tfsnippet.scaffold.summary_writer import SummaryWriter
from tfsnippet.search.core import local_root
from tfsnippet.storage import is_url, resolve

MALFORMED = [
    ('s3:/bucket/run', 's3://bucket/run'),
    ('gs:/bucket/run', 'gs://bucket/run'),
    ('s3:bucket/run', 's3://bucket/run'),
    ('s3//bucket', 's3://bucket'),
    ('S3:/bucket', 's3://bucket'),
    ('s3:\\\\bucket\\run', 's3://bucket\\run'),
    ('s3:://bucket', 's3://bucket'),
    (' s3://bucket/run', 's3://bucket/run'),
    ('memory:/b/run', 'memory://b/run'),
    ('file:/tmp/run', '/tmp/run'),
]


class RunConfig(spt.Config):
    lr = 0.1


@pytest.fixture
def in_empty_dir(tmp_path, monkeypatch):
    """The working directory, empty: a malformed URL taken for a folder would land here."""
    work = tmp_path / 'work'
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv('TFSNIPPET_CACHE_DIR', str(tmp_path / 'cache'))
    return work


@pytest.mark.parametrize('value, meant', MALFORMED)
def test_resolve_and_is_url_refuse_a_malformed_url_with_the_url_meant(value, meant):
    for call in (lambda: resolve(value, argument='checkpoint_dir'),
                 lambda: is_url(value, argument='checkpoint_dir')):
        with pytest.raises(ValueError) as info:
            call()
        message = str(info.value)
        assert message.startswith(f'`checkpoint_dir`={value!r} looks like a URL of the protocol')
        assert 'malformed protocol part' in message and 'not taken for a local folder' in message
        assert f'did you mean {meant!r}' in message
        assert f"start it with ./ ({'./' + value!r})" in message


def test_a_path_object_of_a_url_says_pathlib_folds_its_slashes():
    with pytest.raises(ValueError, match=r"`root`='s3:/bucket/run' .* did you mean "
                                         r"'s3://bucket/run'\? \(a pathlib.Path folds the `//`"):
        resolve(Path('s3://bucket/run'), argument='root')


@pytest.mark.parametrize('value', ['./s3/x', 's3/x', 's3', 'C:\\x', 'C:/x', 'c:x',
                                   'run-12:40/x', 'lr:0.1/run', './s3:/bucket/run',
                                   'my-s3:/x', 'https-ish/x'])
def test_local_paths_that_look_alike_stay_local(value):
    location = resolve(value, argument='checkpoint_dir')
    assert location.is_local and location.path == os.path.abspath(value)
    assert is_url(value) is False


def test_well_formed_urls_are_still_urls():
    assert is_url('s3://bucket/run') and is_url('gs://b') and is_url('memory://b/x')
    assert not is_url('file:///tmp/x')
    assert resolve('s3:///bucket/run').url == 's3://bucket/run'


# ---------------------------------------------------------- every argument that takes one
def _train_loop(**kwargs):
    return spt.TrainLoop([tf.Variable(1.)], max_epoch=1, **kwargs)


ENTRY_POINTS = {
    'checkpoint_dir': lambda v: _train_loop(checkpoint_dir=v),
    'summary_dir': lambda v: _train_loop(summary_dir=v),
    'restore_checkpoint': lambda v: spt.scaffold.components.Checkpointer(
        'ckpt-never-made', restore=v),
    'root': lambda v: Experiment(RunConfig, root=v, name='a', args=[], hparams=False),
    'ResultsStore root': lambda v: ResultsStore(v),
    'search root': lambda v: local_root(v),
    'logdir': lambda v: SummaryWriter(v),
    'save_dir': lambda v: CheckpointStore(v),
    'source': lambda v: spt.warm_start(v, [tf.Variable(1.)]),
    'export path': lambda v: check_export_path(v, 'export_best'),
}
ARGUMENT = {'ResultsStore root': 'root', 'search root': 'root', 'export path': 'export_best'}


@pytest.mark.parametrize('entry', sorted(ENTRY_POINTS))
def test_every_location_argument_refuses_it_and_writes_nothing(entry, in_empty_dir):
    argument = ARGUMENT.get(entry, entry)
    with pytest.raises(ValueError, match=rf"^`{argument}`='s3:/bucket/run' looks like a URL .* "
                                         rf"did you mean 's3://bucket/run'\?"):
        ENTRY_POINTS[entry]('s3:/bucket/run')
    assert os.listdir(in_empty_dir) == []


def test_the_results_command_refuses_it(in_empty_dir, capsys):
    assert results_main(['s3:/bucket/runs', 'list']) == 2
    err = capsys.readouterr().err
    assert "`root`='s3:/bucket/runs' looks like a URL" in err
    assert "did you mean 's3://bucket/runs'?" in err
    assert os.listdir(in_empty_dir) == []
