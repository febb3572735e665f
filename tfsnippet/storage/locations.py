"""Where something is stored: a local folder or an object-store URL.

Every argument of the package that names a place to read or write
(``checkpoint_dir``, ``summary_dir``, ``warm_start`` sources, an
``Experiment`` root, the results CLI's root) goes through :func:`resolve`
first.  A plain path (or a ``file://`` URL) stays a local path and keeps the
local protocol of the code that uses it (``fsync`` and ``rename``).  Any
other URL is served by an `fsspec <https://filesystem-spec.readthedocs.io>`_
file system: ``s3://`` through ``s3fs``, ``gs://`` through ``gcsfs``,
``memory://`` (one process's memory, for tests).  A URL whose protocol is
unknown, or whose package is not installed, is refused with the extra to
install: a URL is never taken for a local folder name.

Nor is a URL with a malformed protocol part: a value that starts with the
name of a URL scheme the package knows (``s3``, ``gs``, ``file``, ``http``,
... of two letters or more) followed by a colon or a doubled slash that is not
exactly ``://`` (``s3:/bucket/run``, ``s3:bucket/run``, ``s3//bucket``,
``s3:\\bucket``, a ``pathlib.Path('s3://b')``, which folds ``//`` into ``/``)
is refused with the URL it probably meant, by :func:`is_url` and
:func:`resolve` alike.  A relative folder named like a scheme (``s3/x``,
``./s3/x``), a Windows drive (``C:\\x``, one letter) and a name whose first
word is not a scheme (``run-12:40``) stay local paths; to name a local folder
``s3:x``, write ``./s3:x``.

The module imports neither TensorFlow nor fsspec until a URL needs it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from ..utils.text import short_repr

__all__ = ['Location', 'StorageUnavailableError', 'resolve', 'is_url', 'PROTOCOL_EXTRAS']

#: The object-store protocols the package knows: protocol -> (the package
#: that serves it, the tfsnippet extra that installs that package).
PROTOCOL_EXTRAS: dict[str, tuple[str, str]] = {
    's3': ('s3fs', 's3'),
    's3a': ('s3fs', 's3'),
    'gs': ('gcsfs', 'gcs'),
    'gcs': ('gcsfs', 'gcs'),
    'memory': ('fsspec', 's3'),
}

_URL = re.compile(r'^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$', re.S)
#: A URL scheme's name, then a colon or two slashes that are not ``://``
#: (``s3:/b``, ``s3:b``, ``s3//b``, ``s3:\\b``, `` s3://b``); checked after `_URL`.
_ALMOST_URL = re.compile(r'^\s*([A-Za-z][A-Za-z0-9+.-]+)\s*(?::+[\\/]*|[\\/]{2,})(.*)$', re.S)
#: The schemes whose malformed URLs are refused rather than taken for a folder:
#: the ones served here, and the common ones a user may type by habit.
_SCHEMES = frozenset(PROTOCOL_EXTRAS) | {
    'file', 'http', 'https', 'hdfs', 'webhdfs', 'az', 'abfs', 'abfss', 'adl', 'wasb',
    'wasbs', 'oss', 'ftp', 'sftp', 'hf', 'dbfs', 'gdrive'}
# protocols whose listings fsspec would otherwise cache for the life of the
# process: another process (another worker, a restarted job) writes there too
_NO_LISTING_CACHE = {'s3', 's3a', 'gs', 'gcs'}


class StorageUnavailableError(RuntimeError):
    """A URL's protocol needs a package that is not installed."""


def _refuse_malformed_url(value: str, argument: str, was_path: bool) -> None:
    """Raise ``ValueError`` when `value` (no well-formed URL) looks like a URL
    whose protocol part is malformed, naming `argument` and the URL meant."""
    match = _ALMOST_URL.match(value)
    if match is None or match.group(1).lower() not in _SCHEMES:
        return
    protocol, rest = match.group(1).lower(), match.group(2).lstrip('/\\')
    if protocol == 'file':
        meant = f"{short_repr('/' + rest)} (or {short_repr('file:///' + rest)})"
    else:
        meant = short_repr(f'{protocol}://{rest}')
    form = 'file:///PATH' if protocol == 'file' else f'{protocol}://BUCKET/PREFIX'
    hint = (' (a pathlib.Path folds the `//` of a URL into `/`: pass a URL as a str)'
            if was_path else '')
    raise ValueError(
        f'`{argument}`={short_repr(value)} looks like a URL of the protocol {protocol!r} with '
        f'a malformed protocol part (a URL is written {form}), so it is not taken for a local '
        f'folder: did you mean {meant}?{hint} To name a local folder so, start it with ./ '
        f'({short_repr("./" + value)})')


def is_url(value: Any, argument: str = 'path') -> bool:
    """Whether `value` is a string of the form ``protocol://...`` other than
    ``file://``.

    Raises:
        ValueError: `value` looks like a URL with a malformed protocol part
            (``s3:/bucket``, ``s3:bucket``, ``s3//bucket``; the module says
            which): it is neither a URL nor a local path (the message names
            `argument` and the URL meant).
    """
    was_path = isinstance(value, os.PathLike)
    if was_path:
        value = os.fspath(value)
    if not isinstance(value, str):
        return False
    match = _URL.match(value)
    if match is None:
        _refuse_malformed_url(value, argument, was_path)
        return False
    return match.group(1).lower() != 'file'


@dataclass(frozen=True)
class Location:
    """A resolved place: a local absolute path, or a path on an fsspec
    file system.

    Attributes:
        url: What identifies the place to a user: the absolute local path,
            or the URL (``s3://bucket/prefix``) without a trailing slash.
        protocol: ``None`` for a local path, else the URL's protocol
            (``'s3'``, ``'gs'``, ``'memory'``).
        path: The path as the file system names it: the local absolute path,
            or the URL without its protocol (``bucket/prefix``).
        fs: The fsspec file system of a URL; ``None`` for a local path.
    """

    url: str
    protocol: str | None
    path: str
    fs: Any = field(default=None, compare=False, repr=False)

    @property
    def is_local(self) -> bool:
        """Whether this is a local path (served by ``os`` and ``open``)."""
        return self.protocol is None

    def join(self, *names: str) -> Location:
        """The location of `names` below this one."""
        if not names:
            return self
        if self.is_local:
            path = os.path.join(self.path, *names)
            return Location(path, None, path)
        rel = '/'.join(n.strip('/') for n in names if n.strip('/'))
        if not rel:
            return self
        return Location(f'{self.url}/{rel}', self.protocol, f'{self.path}/{rel}', self.fs)

    def __str__(self) -> str:
        return self.url

    def __fspath__(self) -> str:
        if not self.is_local:
            raise TypeError(f'{self.url!r} is an object-store URL, not a local path: '
                            f'read and write it through `Location.fs`')
        return self.path


def _filesystem(protocol: str, url: str, argument: str,
                storage_options: dict[str, Any] | None = None) -> Any:
    package, extra = PROTOCOL_EXTRAS[protocol]
    try:
        import fsspec
    except ImportError as error:
        raise StorageUnavailableError(
            f'{argument}={short_repr(url)} is an object-store URL, which needs the package '
            f'`fsspec`: install it with `pip install "tfsnippet[{extra}]"`') from error
    try:
        cls = fsspec.get_filesystem_class(protocol)
    except ImportError as error:
        raise StorageUnavailableError(
            f'{argument}={short_repr(url)} needs the package `{package}` for {protocol}:// '
            f'URLs, which is not installed: `pip install "tfsnippet[{extra}]"`') from error
    options: dict[str, Any] = {}
    if protocol in _NO_LISTING_CACHE:
        options['use_listings_cache'] = False
    options.update(storage_options or {})
    return cls(**options)


def resolve(value: Any, *, argument: str = 'path',
            storage_options: dict[str, Any] | None = None) -> Location:
    """Resolve a path or URL given as `argument` into a :class:`Location`.

    Args:
        value: A local path (``str`` or ``os.PathLike``), a ``file://`` URL,
            an object-store URL (``s3://bucket/prefix``), or a
            :class:`Location` (returned as it is).
        argument: The argument's name, for error messages.
        storage_options: Options of the URL's fsspec file system, for this
            location only (``s3fs``: ``endpoint_url``, ``profile``, ``key``,
            ``secret``, ``client_kwargs``, ...); the resolved Location carries
            its file system, so whatever it is passed to (``checkpoint_dir``,
            an Experiment's ``root``) uses them.  Not for a local path.

    Raises:
        TypeError: `value` is neither a string, a path nor a Location, or
            `storage_options` is not a dict.
        ValueError: A URL of a protocol the package does not know, or one
            without a bucket, or one with a malformed protocol part
            (``s3:/bucket``, see :func:`is_url`).
        StorageUnavailableError: A known protocol whose package is not
            installed (the message names the extra to install).
    """
    if storage_options is not None and not isinstance(storage_options, dict):
        raise TypeError(f'`storage_options` must be a dict of file-system options, got '
                        f'{short_repr(storage_options)}')
    if isinstance(value, Location):
        if storage_options:
            raise ValueError(f'{argument}={value.url!r} is resolved already: give '
                             f'`storage_options` to the resolve that made it')
        return value
    was_path = isinstance(value, os.PathLike)
    if was_path:
        value = os.fspath(value)
    if not isinstance(value, str):
        raise TypeError(f'{argument} must be a path or a URL (str), got {short_repr(value)} '
                        f'({type(value).__name__})')
    match = _URL.match(value)
    if storage_options and (match is None or match.group(1).lower() == 'file'):
        raise ValueError(f'{argument}={short_repr(value)} is a local path: '
                             f'`storage_options` are for object-store URLs only')
    if match is None:
        _refuse_malformed_url(value, argument, was_path)
        path = os.path.abspath(value)
        return Location(path, None, path)
    protocol, rest = match.group(1).lower(), match.group(2)
    if protocol == 'file':
        path = os.path.abspath(rest)
        return Location(path, None, path)
    if protocol not in PROTOCOL_EXTRAS:
        known = ', '.join(f'{p}://' for p in sorted(PROTOCOL_EXTRAS))
        raise ValueError(f'{argument}={short_repr(value)} has the protocol {protocol!r}, which '
                         f'tfsnippet does not store to; expected a local path or one of {known}')
    rest = rest.strip('/')
    if not rest:
        raise ValueError(f'{argument}={short_repr(value)} names no bucket: expected '
                         f'{protocol}://BUCKET/PREFIX')
    fs = _filesystem(protocol, value, argument, storage_options)
    # fsspec's memory file system roots its paths at '/'; the others at the bucket
    path = '/' + rest if protocol == 'memory' else rest
    return Location(f'{protocol}://{rest}', protocol, path, fs)
