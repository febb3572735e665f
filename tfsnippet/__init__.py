"""tfsnippet: a training-loop toolkit for TensorFlow 2.x, in graph and eager style.

``import tfsnippet as spt``; then ``with spt.TrainLoop(...) as loop:``.
"""

from . import scaffold, utils
from .scaffold import *  # noqa: F401,F403
from .scaffold import __all__ as _scaffold_all

__version__ = '0.3.0.dev0'

__all__ = ['scaffold', 'utils', '__version__'] + list(_scaffold_all)
