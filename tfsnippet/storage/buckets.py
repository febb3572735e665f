"""Whether the bucket of an object-store :class:`~tfsnippet.storage.Location`
can be used: checked once where a run or a loop starts, so that a missing
bucket or refused credentials fail there with a clear message."""

from __future__ import annotations

from ..utils.text import short_repr
from .locations import Location

__all__ = ['check_bucket']


def check_bucket(location: Location, argument: str = 'path') -> None:
    """Check that the bucket of `location` exists and can be listed (nothing
    for a local path, or for ``memory://``, whose buckets need no creating).

    Raises:
        ValueError: The bucket does not exist, the credentials are refused, or
            the store cannot be reached (the message names `argument` and the
            bucket).
    """
    if location.is_local or location.protocol == 'memory':
        return
    bucket = location.path.strip('/').split('/', 1)[0]
    where = f'`{argument}`={short_repr(location.url)}'
    try:
        location.fs.ls(bucket, detail=False)
    except FileNotFoundError as e:
        raise ValueError(f'{where}: the bucket {bucket!r} does not exist (create it first, '
                         f'or check the name)') from e
    except PermissionError as e:
        raise ValueError(f'{where}: the credentials were refused for the bucket '
                         f'{bucket!r} ({e})') from e
    except OSError as e:
        raise ValueError(f'{where}: the bucket {bucket!r} cannot be reached ({e})') from e
