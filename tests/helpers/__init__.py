"""What the test suite shares: read TensorBoard files and checkpoints back, fake
clocks, and the TF style (eager or graph) a test body runs in.

Tests import from here (``from tests.helpers import read_scalars``); nothing in
this package imports TensorFlow or TensorBoard until a helper that needs it is
called, so a TF-free test may import it too.
"""

from tests.helpers.checkpoints import (checkpoint_index, checkpoint_listing, checkpoint_path,
                                       checkpoint_state, checkpoint_variable,
                                       checkpoint_variable_names, saved_loop_state)
from tests.helpers.clocks import FakeClock
from tests.helpers.styles import STYLES, Style
from tests.helpers.tensorboard import read_events, read_histograms, read_scalars

__all__ = [
    'FakeClock', 'STYLES', 'Style',
    'checkpoint_index', 'checkpoint_listing', 'checkpoint_path', 'checkpoint_state',
    'checkpoint_variable', 'checkpoint_variable_names', 'saved_loop_state',
    'read_events', 'read_histograms', 'read_scalars',
]
