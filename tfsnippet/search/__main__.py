"""``python -m tfsnippet.search``: see :mod:`tfsnippet.search.cli`."""

import sys

from .cli import main

if __name__ == '__main__':
    sys.exit(main())
