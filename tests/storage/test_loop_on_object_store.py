"""A TrainLoop whose `checkpoint_dir` is an ``s3://`` URL (moto on 127.0.0.1), in
both TF styles: it resumes from the newest committed checkpoint, pins the best,
exports it to a URL that `warm_start` reads back; and bad input is refused at
loop entry, naming `checkpoint_dir`."""

import sys

import numpy as np
import pytest

import tfsnippet as spt
from tests.helpers.s3 import MotoServer
from tfsnippet.scaffold.checkpoint.object_store import ObjectCheckpointStore
from tfsnippet.storage import StorageUnavailableError, resolve


def train(style, w, url, epochs, losses, lines, asynchronous=False, export=None):
    add = style.updater(w, 1.)
    loop = spt.TrainLoop([w], max_epoch=epochs, checkpoint_dir=url, checkpoint_epoch_freq=1,
                         checkpoint_max_to_keep=1, checkpoint_keep_best=True,
                         checkpoint_async=asynchronous, export_best=export,
                         print_func=lines.append, show_eta=False)
    with loop:
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps([0, 1]):
                add()
            loop.collect_metrics(valid_loss=losses[epoch - 1])
    return loop


@pytest.mark.parametrize('asynchronous', [False, True], ids=['sync', 'async'])
def test_resume_pin_and_export_on_s3(style, s3_bucket, asynchronous):
    url = f'{s3_bucket}/runs/a'
    export = f'{url}/best.weights.h5' if not style.is_graph else f'{url}/best'
    losses = [3., 1., 2., 5., 0.5]
    w = style.variable(0., 'w')
    lines = []
    train(style, w, url, 3, losses, lines, asynchronous, export)
    assert lines[-1].startswith('Exported the best weights (valid_loss = 1, epoch 2, step 4) '
                                f'to {export}')
    store = ObjectCheckpointStore(f'{url}/checkpoint')
    assert store.checkpoints() == [f'{url}/checkpoint/checkpoint.dat-{s}' for s in (4, 6)]
    assert store.best()[1]['value'] == 1.

    # a new process would start here: the variable is reset, the loop resumes
    style.session.run(w.assign(0.)) if style.is_graph else w.assign(0.)
    lines = []
    train(style, w, url, 5, losses, lines, asynchronous, export)
    assert lines[0] == (f'Resume training: epoch 3, step 6, from checkpoint '
                        f'{url}/checkpoint/checkpoint.dat-6')
    assert style.value(w) == 10.
    assert store.checkpoints() == [f'{url}/checkpoint/checkpoint.dat-10']
    assert lines[-1].startswith('Exported the best weights (valid_loss = 0.5, epoch 5, step 10)')

    # the export and the checkpoints are read back from the bucket
    target = style.variable(0., 'w')
    report = spt.warm_start(export, {'w': target},
                            print_func=None)
    assert report.source == export and style.value(target) == 10.
    style.session.run(target.assign(0.)) if style.is_graph else target.assign(0.)
    report = spt.warm_start(url, {'w': target}, print_func=None)
    assert report.source == f'{url}/checkpoint/checkpoint.dat-10'
    assert style.value(target) == 10.


def test_nothing_is_written_locally_for_a_url(s3_bucket, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    import tensorflow as tf
    w = tf.Variable(0.)
    with spt.TrainLoop([w], max_epoch=1, checkpoint_dir=f'{s3_bucket}/x',
                       print_func=lambda line: None) as loop:
        for _ in loop.iter_epochs():
            pass
    assert list(tmp_path.iterdir()) == []
    assert ObjectCheckpointStore(f'{s3_bucket}/x/checkpoint').latest() is not None


def entered(url):
    import tensorflow as tf
    loop = spt.TrainLoop([tf.Variable(0.)], max_epoch=1, checkpoint_dir=url,
                         print_func=lambda line: None)
    with loop:
        pass


def test_a_bucket_that_does_not_exist_is_refused_at_loop_entry(s3_server):
    with pytest.raises(ValueError) as info:
        entered('s3://no-such-bucket-tfsnippet/run1')
    assert str(info.value).startswith(
        "`checkpoint_dir`='s3://no-such-bucket-tfsnippet/run1': the bucket "
        "'no-such-bucket-tfsnippet' does not exist")


def test_refused_credentials_are_said_at_loop_entry(s3_server):
    """A second moto server that authenticates every request: the test's keys are
    not among its users, so it refuses them (``InvalidAccessKeyId``)."""
    import s3fs
    s3fs.S3FileSystem.clear_instance_cache()
    strict = MotoServer(env={'INITIAL_NO_AUTH_ACTION_COUNT': '0'}).start()
    try:
        with pytest.raises(ValueError) as info:
            entered('s3://any-bucket/run1')
    finally:
        strict.stop()
        s3fs.S3FileSystem.clear_instance_cache()
    message = str(info.value)
    assert message.startswith("`checkpoint_dir`='s3://any-bucket/run1': the object store "
                              "refused the credentials for the bucket 'any-bucket' "
                              "(PermissionError")
    assert 'AWS_ACCESS_KEY_ID' in message


def test_gs_without_gcsfs_and_unknown_protocols_are_refused(monkeypatch):
    monkeypatch.setitem(sys.modules, 'gcsfs', None)   # as where gcsfs is not installed
    import tensorflow as tf
    with pytest.raises(StorageUnavailableError, match=r'pip install "tfsnippet\[gcs\]"'):
        spt.TrainLoop([tf.Variable(0.)], checkpoint_dir='gs://bucket/run1')
    with pytest.raises(ValueError, match="checkpoint_dir='hdfs://nn/run1' has the protocol "
                                         "'hdfs'"):
        spt.TrainLoop([tf.Variable(0.)], checkpoint_dir='hdfs://nn/run1')
    with pytest.raises(ValueError, match="export_best='ftp://x/w.weights.h5' has the protocol"):
        spt.TrainLoop([tf.Variable(0.)], checkpoint_dir='memory://b/run',
                      checkpoint_keep_best='loss', export_best='ftp://x/w.weights.h5')
    with pytest.raises(ValueError, match="source='foo://x/y' has the protocol 'foo'"):
        spt.warm_start('foo://x/y', [tf.Variable(0.)])
    assert resolve('memory://b/run').fs is not None
