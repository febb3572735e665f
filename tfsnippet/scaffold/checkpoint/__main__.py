"""``python -m tfsnippet.scaffold.checkpoint convert DIR``: rewrite legacy checkpoints.

Converts every legacy (pickled ``state.pkl``) tfsnippet checkpoint at or
under ``DIR`` into the current data-only format (see
:func:`~tfsnippet.scaffold.checkpoint.convert_legacy_checkpoints`).
Running it says that you trust those checkpoints: their pickles are loaded.
"""

from __future__ import annotations

import argparse
import sys

from .state_format import convert_legacy_checkpoints


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = argparse.ArgumentParser(
        prog='python -m tfsnippet.scaffold.checkpoint',
        description='Tools for tfsnippet checkpoints.')
    commands = parser.add_subparsers(dest='command', required=True)
    convert = commands.add_parser(
        'convert', help='rewrite the legacy (pickled) checkpoints at or under DIR into the '
                        'data-only format; only for checkpoints you trust, as their pickles '
                        'are loaded')
    convert.add_argument('dir', metavar='DIR')
    args = parser.parse_args(argv)
    try:
        converted = convert_legacy_checkpoints(args.dir)
    except (OSError, TypeError, RuntimeError) as e:
        print(f'error: {e}', file=sys.stderr)
        return 1
    for path in converted:
        print(f'converted {path}')
    print(f'{len(converted)} legacy checkpoint{"s" if len(converted) != 1 else ""} converted')
    return 0


if __name__ == '__main__':
    sys.exit(main())
