"""`tfsnippet.storage.resolve`: local paths stay local, URLs get a file system,
and a URL nothing can serve is refused with what to install."""

import os
import sys

import pytest

from tfsnippet.storage import Location, StorageUnavailableError, is_url, resolve


def test_local_paths_stay_local(tmp_path):
    for value in [str(tmp_path / 'run'), tmp_path / 'run', f'file://{tmp_path}/run']:
        location = resolve(value, argument='checkpoint_dir')
        assert location.is_local and location.fs is None
        assert location.path == location.url == str(tmp_path / 'run')
        assert os.fspath(location) == str(tmp_path / 'run')
    assert resolve('relative/dir').path == os.path.abspath('relative/dir')
    assert resolve(str(tmp_path)).join('a', 'b').path == str(tmp_path / 'a' / 'b')


def test_memory_url_reads_back_what_was_written():
    location = resolve('memory://bucket-x/run1/', argument='summary_dir')
    assert (location.url, location.protocol, location.is_local) == \
        ('memory://bucket-x/run1', 'memory', False)
    leaf = location.join('checkpoint', 'index.json')
    assert leaf.url == 'memory://bucket-x/run1/checkpoint/index.json'
    leaf.fs.pipe(leaf.path, b'{"seq": 1}')
    assert location.fs.cat(location.join('checkpoint/index.json').path) == b'{"seq": 1}'
    with pytest.raises(TypeError, match='object-store URL, not a local path'):
        os.fspath(location)


def test_s3_url_round_trip(s3_bucket):
    location = resolve(f'{s3_bucket}/runs/a', argument='root')
    assert location.protocol == 's3' and location.path == s3_bucket[5:] + '/runs/a'
    location.fs.pipe(location.join('x').path, b'123')
    assert resolve(f'{s3_bucket}/runs').fs.cat(f'{s3_bucket[5:]}/runs/a/x') == b'123'


@pytest.mark.parametrize('value, error, words', [
    ('foo://bucket/x', ValueError, ["checkpoint_dir='foo://bucket/x'", "protocol 'foo'",
                                    's3://']),
    ('s3://', ValueError, ['names no bucket', 's3://BUCKET/PREFIX']),
    (42, TypeError, ['checkpoint_dir must be a path or a URL', '42 (int)']),
])
def test_bad_locations_are_refused(value, error, words):
    with pytest.raises(error) as info:
        resolve(value, argument='checkpoint_dir')
    for word in words:
        assert word in str(info.value)


def test_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, 'gcsfs', None)   # as if gcsfs were not installed
    with pytest.raises(StorageUnavailableError) as info:
        resolve('gs://my-bucket/run1', argument='checkpoint_dir')
    assert 'gcsfs' in str(info.value) and 'pip install "tfsnippet[gcs]"' in str(info.value)
    assert "checkpoint_dir='gs://my-bucket/run1'" in str(info.value)


def test_is_url():
    assert is_url('s3://b/x') and is_url('gs://b') and not is_url('file:///tmp/x')
    assert not is_url('/tmp/x') and not is_url(None)
    assert isinstance(resolve(resolve('memory://b/c')), Location)
