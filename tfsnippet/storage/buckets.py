"""Whether the bucket of an object-store :class:`~tfsnippet.storage.Location`
can be used: checked once where a run or a loop starts, so that a missing
bucket or refused credentials fail there, with one message for each whatever
the argument (:func:`bucket_error`)."""

from __future__ import annotations

from ..utils.text import short_repr
from .locations import Location

__all__ = ['check_bucket', 'bucket_error']


def bucket_error(location: Location, argument: str, error: BaseException,
                 doing: str = 'reached') -> ValueError:
    """The ``ValueError`` that says what the object store answered about
    `location`, given as `argument`: its bucket does not exist
    (``FileNotFoundError``), the credentials were refused
    (``PermissionError``), or it cannot be `doing` (anything else).
    Raise it ``from error``."""
    bucket = location.path.strip('/').split('/', 1)[0]
    where = f'`{argument}`={short_repr(location.url)}'
    what = f'{type(error).__name__}: {error}'
    if isinstance(error, FileNotFoundError):
        return ValueError(f'{where}: the bucket {bucket!r} does not exist (or these '
                          f'credentials cannot see it): create it first, or check the name '
                          f'({what})')
    if isinstance(error, PermissionError):
        return ValueError(f'{where}: the object store refused the credentials for the bucket '
                          f'{bucket!r} ({what}): check AWS_ACCESS_KEY_ID and '
                          f'AWS_SECRET_ACCESS_KEY (or the GCS credentials) and the bucket\'s '
                          f'permissions')
    return ValueError(f'{where}: the bucket {bucket!r} cannot be {doing} ({what})')


def check_bucket(location: Location, argument: str = 'path') -> None:
    """Check that the bucket of `location` exists and can be listed (nothing
    for a local path, or for ``memory://``, whose buckets need no creating).

    Raises:
        ValueError: The bucket does not exist, the credentials are refused, or
            the store cannot be reached (:func:`bucket_error`: the message
            names `argument`, its URL and the bucket).
    """
    if location.is_local or location.protocol == 'memory':
        return
    bucket = location.path.strip('/').split('/', 1)[0]
    try:
        location.fs.ls(bucket, detail=False)
    except OSError as e:
        raise bucket_error(location, argument, e) from e
