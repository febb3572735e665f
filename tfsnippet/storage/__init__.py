"""Paths and URLs: local folders and object stores (S3, GCS) through fsspec.

See :mod:`tfsnippet.storage.locations`.  Nothing here imports TensorFlow.
"""

from .buckets import bucket_error, check_bucket
from .locations import PROTOCOL_EXTRAS, Location, StorageUnavailableError, is_url, resolve

__all__ = ['Location', 'StorageUnavailableError', 'resolve', 'is_url', 'PROTOCOL_EXTRAS',
           'check_bucket', 'bucket_error']
