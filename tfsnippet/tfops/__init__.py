"""The TensorFlow helpers: sessions, variables, their values, tensor wrappers.

Everything here imports TensorFlow.  The classic names stay reachable from
:mod:`tfsnippet.utils` too (``spt.utils.create_session``,
``from tfsnippet.utils import TensorWrapper``), where they are loaded on
first use, so that ``import tfsnippet.utils`` itself imports no TensorFlow.
"""

from .session import (create_session, ensure_variables_initialized, get_default_session_or_error,
                      get_uninitialized_variables, get_variables_as_dict)
from .tensor_wrapper import TensorWrapper, register_tensor_wrapper_class
from .tf_vars import as_tf_variable, is_variable, normalize_variables, variable_name, variable_shape
from .var_io import assign_variables, read_variables
from .seeding import seed_everything

__all__ = [
    'create_session', 'ensure_variables_initialized', 'get_default_session_or_error',
    'get_uninitialized_variables', 'get_variables_as_dict', 'TensorWrapper',
    'register_tensor_wrapper_class', 'as_tf_variable', 'is_variable', 'normalize_variables',
    'variable_name', 'variable_shape', 'assign_variables', 'read_variables',
    'seed_everything',
]
