"""Summaries on object storage: ``TrainLoop(summary_dir='s3://...')`` and
``SummaryWriter('s3://...')`` (a moto server on 127.0.0.1), the event files read
back from the bucket with TensorBoard's own reader, in both TF styles."""

from __future__ import annotations

import os

import pytest

import tfsnippet as spt
from tests.helpers import read_scalars
from tests.scaffold.test_summaries import LOSS, STEPS_PER_SEC, VALID, train_in_style


def download(url, folder):
    """The objects under `url`, copied into `folder`; their names."""
    import s3fs
    fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False)
    names = []
    for path in fs.find(url[len('s3://'):]):
        name = path.rsplit('/', 1)[-1]
        fs.get_file(path, os.path.join(folder, name))
        names.append(name)
    return sorted(names)


def test_summary_dir_on_s3_reads_back_as_on_disk(style, s3_bucket, tmp_path, fake_clock,
                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    url = f'{s3_bucket}/logs/run1'
    loop = spt.TrainLoop(max_epoch=2, summary_dir=url, clock=fake_clock,
                         print_func=lambda s: None)
    with loop:
        pass   # entered and left: the writer's lifecycle without a step
    loop = spt.TrainLoop(max_epoch=2, summary_dir=url, clock=fake_clock,
                         print_func=lambda s: None)
    train_in_style(loop, style, fake_clock)
    local = tmp_path / 'down'
    local.mkdir()
    names = download(url, local)
    assert len(names) == 2 and all(n.startswith('events.out.tfevents.') for n in names)
    assert read_scalars(local) == {
        'metrics/loss': LOSS,
        'metrics/valid_loss': VALID,
        'x': [(3, 10.), (6, 20.)],
        'global_step/sec': STEPS_PER_SEC,
    }
    assert sorted(os.listdir(tmp_path)) == ['down']   # nothing written to ./s3:/...


def test_writer_uploads_at_flush_in_the_background_and_at_close(s3_bucket, tmp_path):
    url = f'{s3_bucket}/logs'
    writer = spt.SummaryWriter(url, flush_secs=3600)
    assert writer.logdir == url
    writer.add_scalars({'a': 1.}, step=1)
    writer.flush()   # asks for an upload and returns
    writer.add_scalars({'a': 2.}, step=2)
    writer.close()   # the last upload is waited for
    names = download(url, tmp_path)
    assert len(names) == 1
    assert read_scalars(tmp_path) == {'a': [(1, 1.), (2, 2.)]}


def test_a_missing_bucket_fails_at_loop_entry(s3_server, fake_clock):
    loop = spt.TrainLoop(max_epoch=1, summary_dir='s3://no-such-bucket-here/logs',
                         clock=fake_clock, print_func=lambda s: None)
    with pytest.raises(ValueError, match=r"summary_dir`='s3://no-such-bucket-here/logs': "
                                         r"the bucket 'no-such-bucket-here' does not exist"):
        with loop:
            pass


def test_an_unknown_protocol_is_refused_when_the_loop_is_made(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"summary_dir='hdfs://nn/logs' has the protocol"):
        spt.TrainLoop(max_epoch=1, summary_dir='hdfs://nn/logs')
    assert os.listdir(tmp_path) == []


def test_a_missing_package_names_the_extra_when_the_loop_is_made(tmp_path, monkeypatch):
    import importlib.util
    if importlib.util.find_spec('gcsfs') is not None:
        pytest.skip('gcsfs is installed here')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(spt.storage.StorageUnavailableError, match=r'tfsnippet\[gcs\]'):
        spt.TrainLoop(max_epoch=1, summary_dir='gs://bucket/logs')
    assert os.listdir(tmp_path) == []
