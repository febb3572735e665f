"""A missing bucket and refused credentials: one message each, naming the argument,
its URL and the bucket, wherever a location is taken; an Experiment says it when
it is made (it reads the run's saved config from the bucket then)."""

from __future__ import annotations

import re

import pytest
import tensorflow as tf

import tfsnippet as spt
from tests.helpers.s3 import MotoServer
from tfsnippet.results import query

MISSING = 'no-such-bucket-tfsnippet'


def missing_message(argument, url):
    return (f'`{argument}`={url!r}: the bucket {MISSING!r} does not exist (or these '
            f'credentials cannot see it): create it first, or check the name (')


def refused_message(argument, url, bucket):
    return (f'`{argument}`={url!r}: the object store refused the credentials for the bucket '
            f'{bucket!r} (PermissionError: ')


class RunConfig(spt.Config):
    lr = 0.1


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv('TFSNIPPET_CACHE_DIR', str(tmp_path / 'cache'))


def enter_loop(url):
    loop = spt.TrainLoop([tf.Variable(0.)], max_epoch=1, checkpoint_dir=url,
                         print_func=lambda line: None)
    with loop:
        pass


def test_a_missing_bucket_gets_one_message_for_every_argument(s3_server):
    url = f's3://{MISSING}/runs'
    # the Experiment: when it is made, not when it is entered
    with pytest.raises(ValueError) as info:
        spt.Experiment(RunConfig, root=url, name='a', args=[], hparams=False)
    assert str(info.value).startswith(missing_message('root', url))
    with pytest.raises(ValueError) as info:
        enter_loop(f'{url}/a')
    assert str(info.value).startswith(missing_message('checkpoint_dir', f'{url}/a'))
    with pytest.raises(ValueError) as info:
        spt.warm_start(f'{url}/a', [tf.Variable(0.)], print_func=None)
    assert str(info.value).startswith(missing_message('source', f'{url}/a'))
    with pytest.raises(ValueError) as info:
        query(url)
    assert str(info.value).startswith(missing_message('root', url))


@pytest.fixture
def strict_server(s3_server):
    """A second moto server that authenticates every request: the test's keys are not
    among its users, so it refuses them (``InvalidAccessKeyId``)."""
    import s3fs
    s3fs.S3FileSystem.clear_instance_cache()
    strict = MotoServer(env={'INITIAL_NO_AUTH_ACTION_COUNT': '0'}).start()
    try:
        yield strict
    finally:
        strict.stop()
        s3fs.S3FileSystem.clear_instance_cache()


def test_refused_credentials_get_one_message_and_fail_when_the_experiment_is_made(
        strict_server):
    url = 's3://any-bucket/runs'
    with pytest.raises(ValueError) as info:
        spt.Experiment(RunConfig, root=url, name='a', args=[], hparams=False)
    message = str(info.value)
    assert message.startswith(refused_message('root', url, 'any-bucket'))
    assert re.search(r'\): check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY \(or the GCS '
                     r"credentials\) and the bucket's permissions$", message)
    with pytest.raises(ValueError) as info:
        enter_loop(f'{url}/a')
    assert str(info.value).startswith(refused_message('checkpoint_dir', f'{url}/a',
                                                      'any-bucket'))
