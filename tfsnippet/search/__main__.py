"""``python -m tfsnippet.search``: see :mod:`tfsnippet.search.cli`."""

import sys

if __name__ == '__main__':
    try:
        from .cli import main
    except ModuleNotFoundError as e:
        if (e.name or '').partition('.')[0] != 'optuna':
            raise
        from . import INSTALL_HINT
        sys.exit(f'python -m tfsnippet.search: error: the search runs on Optuna, which is not '
                 f'installed ({e}): {INSTALL_HINT}')
    sys.exit(main())
