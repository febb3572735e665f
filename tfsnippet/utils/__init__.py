"""Utilities shared by the training loop: events, contexts, statistics, timing, text.

The package imports no TensorFlow (nor NumPy) when imported: each name below
is loaded from its module on first use.  The TensorFlow helpers live in
:mod:`tfsnippet.tfops`; their classic names (``create_session``,
``TensorWrapper``, ``get_variables_as_dict``...) stay reachable here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: ``tfsnippet.utils.<name>`` -> the module that defines it (``..`` for tfsnippet.tfops).
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(['minibatch_slices_iterator', 'split_numpy_array', 'split_numpy_arrays'],
                    '.arrays'),
    **dict.fromkeys(['AutoInitAndCloseable', 'Disposable', 'DisposableContext',
                     'NoReentrantContext'], '.concepts'),
    **dict.fromkeys(['ConsoleTable', 'print_as_table'], '.console_table'),
    **dict.fromkeys(['ContextStack', 'maybe_close'], '.contexts'),
    **dict.fromkeys(['deprecated', 'deprecated_arg'], '.deprecation'),
    **dict.fromkeys(['EventHandle', 'EventSource', 'Every'], '.events'),
    **dict.fromkeys(['TemporaryDirectory', 'iter_files', 'makedirs', 'write_json'], '.files'),
    **dict.fromkeys(['ETA', 'humanize_duration'], '.misc'),
    'camel_to_underscore': '.naming',
    **dict.fromkeys(['generate_random_seed', 'make_random_state'], '.rng'),
    'StatisticsCollector': '.statistics',
    **dict.fromkeys(['PREEMPTED_EXIT_CODE', 'RUN_STATUSES', 'FINISH_STATUSES',
                     'status_of_exit'], '.status'),
    **dict.fromkeys(['short_repr', 'typed_repr', 'close_matches', 'close_matches_hint',
                     'did_you_mean'], '.text'),
    **dict.fromkeys(['check_positive_int', 'check_positive_number', 'check_bool'],
                    '.validation'),
    # the TensorFlow helpers, in tfsnippet.tfops
    **dict.fromkeys(['create_session', 'ensure_variables_initialized',
                     'get_default_session_or_error', 'get_uninitialized_variables',
                     'get_variables_as_dict'], '..tfops.session'),
    **dict.fromkeys(['TensorWrapper', 'register_tensor_wrapper_class'],
                    '..tfops.tensor_wrapper'),
    **dict.fromkeys(['as_tf_variable', 'is_variable', 'variable_name', 'variable_shape'],
                    '..tfops.tf_vars'),
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value   # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # what type checkers and IDEs see
    from ..tfops.session import (create_session, ensure_variables_initialized,  # noqa: F401
                                 get_default_session_or_error, get_uninitialized_variables,
                                 get_variables_as_dict)
    from ..tfops.tensor_wrapper import TensorWrapper, register_tensor_wrapper_class  # noqa: F401
    from ..tfops.tf_vars import (as_tf_variable, is_variable, variable_name,  # noqa: F401
                                 variable_shape)
    from .arrays import (minibatch_slices_iterator, split_numpy_array,  # noqa: F401
                         split_numpy_arrays)
    from .concepts import (AutoInitAndCloseable, Disposable, DisposableContext,  # noqa: F401
                           NoReentrantContext)
    from .console_table import ConsoleTable, print_as_table  # noqa: F401
    from .contexts import ContextStack, maybe_close  # noqa: F401
    from .deprecation import deprecated, deprecated_arg  # noqa: F401
    from .events import EventHandle, EventSource, Every  # noqa: F401
    from .files import TemporaryDirectory, iter_files, makedirs, write_json  # noqa: F401
    from .misc import ETA, humanize_duration  # noqa: F401
    from .naming import camel_to_underscore  # noqa: F401
    from .rng import generate_random_seed, make_random_state  # noqa: F401
    from .statistics import StatisticsCollector  # noqa: F401
    from .status import (FINISH_STATUSES, PREEMPTED_EXIT_CODE, RUN_STATUSES,  # noqa: F401
                         status_of_exit)
    from .text import (close_matches, close_matches_hint, did_you_mean, short_repr,  # noqa: F401
                       typed_repr)
    from .validation import check_bool, check_positive_int, check_positive_number  # noqa: F401
