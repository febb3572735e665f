"""Hyperparameter search on Optuna whose trials are Experiment runs of your own loop.

``pip install "tfsnippet[optuna]"``; then ``spt.Search(Config, space=..., metric=...)``
(see :class:`~tfsnippet.search.search.Search`) or, process per trial,
``python -m tfsnippet.search --root runs --study S --trials 20 --jobs 2 --space
lr=float:1e-4:1e-1:log -- script.py``.  Importing this package imports Optuna
when it is installed, not TensorFlow.  Without Optuna the names stay importable
(``from tfsnippet import *`` works with the base install): making a ``Search``
raises an ``ImportError`` that says what to install.
"""

from .space import Categorical, Float, Int

#: What to install for a search.
INSTALL_HINT = 'pip install "tfsnippet[optuna]"'

try:
    from .core import TrialPruned
    from .search import Search
except ModuleNotFoundError as e:
    if (e.name or '').partition('.')[0] != 'optuna':
        raise
    _missing = e
    from ..utils.status import RunPruned

    class TrialPruned(RunPruned):  # type: ignore[no-redef]
        """A trial's pruning (Optuna is not installed: nothing raises it)."""

    class Search:  # type: ignore[no-redef]
        """``spt.Search`` without Optuna installed: making one raises ``ImportError``."""

        def __init__(self, *args: object, **kwargs: object) -> None:
            raise ImportError(f'spt.Search runs on Optuna, which is not installed '
                              f'({_missing}): {INSTALL_HINT}') from _missing

__all__ = ['Search', 'Int', 'Float', 'Categorical', 'TrialPruned']
