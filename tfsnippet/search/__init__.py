"""Hyperparameter search on Optuna whose trials are Experiment runs of your own loop.

``pip install "tfsnippet[optuna]"``; then ``spt.Search(Config, space=..., metric=...)``
(see :class:`~tfsnippet.search.search.Search`) or, process per trial,
``python -m tfsnippet.search --root runs --study S --trials 20 --jobs 2 --space
lr=float:1e-4:1e-1:log -- script.py``.  Importing this package imports Optuna,
not TensorFlow.
"""

from .core import TrialPruned
from .search import Search
from .space import Categorical, Float, Int

__all__ = ['Search', 'Int', 'Float', 'Categorical', 'TrialPruned']
