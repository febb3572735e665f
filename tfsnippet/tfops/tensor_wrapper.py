"""A base class for objects that stand for a tensor and can be used wherever one is expected."""

from __future__ import annotations

import functools
import threading
from typing import Any, NoReturn

import tensorflow as tf

__all__ = ['TensorWrapper', 'register_tensor_wrapper_class']

# per thread: the ids of the wrappers whose constructor is running
_constructing = threading.local()


def _constructing_ids() -> set[int]:
    ids = getattr(_constructing, 'ids', None)
    if ids is None:
        ids = _constructing.ids = set()
    return ids


class TensorWrapper:
    """An object that holds a tensor (or variable) and behaves as that tensor.

    A subclass implements the :attr:`tensor` property; the base class then
    makes its instances usable in place of the tensor, in graph and eager
    mode alike:

    * ``tf.convert_to_tensor(w)`` returns ``w.tensor``, so any TensorFlow op
      accepts ``w`` as an argument;
    * the operators ``+ - * / // % ** @``, unary ``-``, ``abs()``, ``~``,
      ``& | ^``, ``< <= > >=`` and indexing (``w[0]``) act on ``w.tensor``;
    * public attributes the wrapper does not define itself (``dtype``,
      ``shape``, ``op``, ...) are read from ``w.tensor``, and assigning or
      deleting such an attribute (``w.foo = 1``, ``del w.foo``) acts on
      ``w.tensor`` too, as in the classic version.  Attributes set by the
      constructor, private names (``_x``), names the class defines and names
      already set on the wrapper stay on the wrapper;
    * in graph mode, ``session.run(w)`` fetches ``w.tensor`` and ``w`` may be
      a key of a ``feed_dict`` (feeding ``w.tensor``).  This goes through
      TensorFlow's documented ``_as_graph_element()`` protocol, so it needs
      no registration.

    Every subclass is convertible without further set-up; the classic
    :func:`register_tensor_wrapper_class` is kept for old code.

    .. note::
        ``==`` and ``!=`` compare identity (wrappers are dict keys, e.g. in
        a feed dict); use ``tf.equal`` to compare values.  Using a wrapper as
        a bool, or iterating over it, raises :class:`TypeError`.

    Example:
        >>> import tensorflow as tf
        >>> class Doubled(TensorWrapper):
        ...     def __init__(self, x):
        ...         self._x = tf.convert_to_tensor(x)
        ...     @property
        ...     def tensor(self):
        ...         return self._x * 2
        >>> d = Doubled([1., 2.])
        >>> d.dtype
        tf.float32
        >>> (d + 1).numpy().tolist()
        [3.0, 5.0]
        >>> tf.reduce_sum(d).numpy().item()
        6.0
    """

    # numpy defers binary operators to the wrapper's reflected ones, as for tf.Tensor
    __array_priority__ = 100

    @property
    def tensor(self) -> Any:
        """The wrapped tensor; subclasses must implement it."""
        raise NotImplementedError(
            f'{type(self).__name__} must implement the `tensor` property')

    # ------------------------------------------------------------ attributes
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get('__init__')
        if init is None:
            return

        # attributes a constructor sets are the wrapper's own, whatever their name
        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kw: Any) -> None:
            ids = _constructing_ids()
            outermost = id(self) not in ids
            ids.add(id(self))
            try:
                init(self, *args, **kw)
            finally:
                if outermost:
                    ids.discard(id(self))

        setattr(cls, '__init__', __init__)

    def __getattr__(self, name: str) -> Any:
        # only reached when normal lookup fails; private names are never
        # forwarded, so a missing `_x` in a subclass is reported as such
        # instead of recursing through `tensor`
        if name.startswith('_') or name == 'tensor':
            raise AttributeError(
                f'{type(self).__name__!r} object has no attribute {name!r}')
        return getattr(self.tensor, name)

    def _own_attribute(self, name: str) -> bool:
        return (name.startswith('_') or name == 'tensor' or name in self.__dict__
                or hasattr(type(self), name) or id(self) in _constructing_ids())

    def __setattr__(self, name: str, value: Any) -> None:
        if self._own_attribute(name):
            object.__setattr__(self, name, value)
        else:
            setattr(self.tensor, name, value)

    def __delattr__(self, name: str) -> None:
        if self._own_attribute(name):
            object.__delattr__(self, name)
        else:
            delattr(self.tensor, name)

    def __dir__(self) -> list[str]:
        return sorted(set(object.__dir__(self)) | set(dir(self.tensor)))

    def _as_graph_element(self) -> Any:
        """What ``session.run`` fetches and feeds for this wrapper (graph mode)."""
        return self.tensor

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self.tensor!r})'

    # ------------------------------------------------------------ not a container
    def __bool__(self) -> NoReturn:
        raise TypeError(
            f'A `{type(self).__name__}` cannot be used as a Python bool: test '
            f'`x is not None` instead of `x`, and use TensorFlow ops (e.g. tf.cond) '
            f'for decisions on its value')

    def __iter__(self) -> NoReturn:
        raise TypeError(f'`{type(self).__name__}` is not iterable')

    def __getitem__(self, item: Any) -> Any:
        return self.tensor[item]

    # ------------------------------------------------------------ operators
    # Each one applies the wrapped tensor's own operator, so dtype handling
    # and the mixing with Python numbers, numpy arrays and other tensors is
    # exactly that of TensorFlow.
    def __abs__(self) -> Any:
        return abs(self.tensor)

    def __neg__(self) -> Any:
        return -self.tensor

    def __invert__(self) -> Any:
        return ~self.tensor

    def __add__(self, other: Any) -> Any:
        return self.tensor.__add__(other)

    def __radd__(self, other: Any) -> Any:
        return self.tensor.__radd__(other)

    def __sub__(self, other: Any) -> Any:
        return self.tensor.__sub__(other)

    def __rsub__(self, other: Any) -> Any:
        return self.tensor.__rsub__(other)

    def __mul__(self, other: Any) -> Any:
        return self.tensor.__mul__(other)

    def __rmul__(self, other: Any) -> Any:
        return self.tensor.__rmul__(other)

    def __truediv__(self, other: Any) -> Any:
        return self.tensor.__truediv__(other)

    def __rtruediv__(self, other: Any) -> Any:
        return self.tensor.__rtruediv__(other)

    def __floordiv__(self, other: Any) -> Any:
        return self.tensor.__floordiv__(other)

    def __rfloordiv__(self, other: Any) -> Any:
        return self.tensor.__rfloordiv__(other)

    def __mod__(self, other: Any) -> Any:
        return self.tensor.__mod__(other)

    def __rmod__(self, other: Any) -> Any:
        return self.tensor.__rmod__(other)

    def __pow__(self, other: Any) -> Any:
        return self.tensor.__pow__(other)

    def __rpow__(self, other: Any) -> Any:
        return self.tensor.__rpow__(other)

    def __matmul__(self, other: Any) -> Any:
        return self.tensor.__matmul__(other)

    def __rmatmul__(self, other: Any) -> Any:
        return self.tensor.__rmatmul__(other)

    def __and__(self, other: Any) -> Any:
        return self.tensor.__and__(other)

    def __rand__(self, other: Any) -> Any:
        return self.tensor.__rand__(other)

    def __or__(self, other: Any) -> Any:
        return self.tensor.__or__(other)

    def __ror__(self, other: Any) -> Any:
        return self.tensor.__ror__(other)

    def __xor__(self, other: Any) -> Any:
        return self.tensor.__xor__(other)

    def __rxor__(self, other: Any) -> Any:
        return self.tensor.__rxor__(other)

    def __lt__(self, other: Any) -> Any:
        return self.tensor.__lt__(other)

    def __le__(self, other: Any) -> Any:
        return self.tensor.__le__(other)

    def __gt__(self, other: Any) -> Any:
        return self.tensor.__gt__(other)

    def __ge__(self, other: Any) -> Any:
        return self.tensor.__ge__(other)


def _convert_wrapper(value: TensorWrapper, dtype: Any = None, name: str | None = None,
                     as_ref: bool = False) -> Any:
    if as_ref:
        raise ValueError(
            f'A `{type(value).__name__}` cannot be converted to a reference tensor: '
            f'pass its variable instead')
    return tf.convert_to_tensor(value.tensor, dtype=dtype, name=name)


# registered once for the base class: the registry matches subclasses too
tf.register_tensor_conversion_function(TensorWrapper, _convert_wrapper)


def register_tensor_wrapper_class(cls: type) -> type:
    """Check that `cls` is a :class:`TensorWrapper` subclass, and return it.

    Classic code calls this for each subclass; here every subclass is
    already convertible by ``tf.convert_to_tensor`` and fetchable by
    ``session.run``, so nothing else is needed.  It returns `cls`, so it
    can also decorate the class.

    Raises:
        TypeError: `cls` is not a subclass of :class:`TensorWrapper`.
    """
    if not isinstance(cls, type) or not issubclass(cls, TensorWrapper):
        raise TypeError(f'`cls` must be a subclass of TensorWrapper, got {cls!r}')
    return cls
