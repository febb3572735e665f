"""tfsnippet: a training-loop toolkit for TensorFlow 2.x, in graph and eager style.

``import tfsnippet as spt``; then ``with spt.TrainLoop(...) as loop:``.
"""

from . import dataflows, scaffold, trainer, utils
from .dataflows import DataFlow, DataMapper, SlidingWindow
from .scaffold import *  # noqa: F401,F403
from .scaffold import __all__ as _scaffold_all
from .trainer import *  # noqa: F401,F403
from .trainer import __all__ as _trainer_all

__version__ = '0.3.0.dev0'

__all__ = (['dataflows', 'scaffold', 'trainer', 'utils', '__version__', 'DataFlow',
            'DataMapper', 'SlidingWindow'] + list(_scaffold_all) + list(_trainer_all))
