"""The training loop's component registry and its persistent state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from ..components.base import LoopComponent

if TYPE_CHECKING:  # pragma: no cover
    from ...dataflows import DataFlow
    from ..metrics.monitor import Monitor
    from .core import TrainLoop
    from .progress import LoopProgress

__all__ = ['ComponentRegistry']


class ComponentRegistry:
    """The components of a :class:`~tfsnippet.TrainLoop` and its ``state_dict``, as a base class."""

    # set by TrainLoop.__init__
    _components: list[LoopComponent]
    _progress: LoopProgress
    _dataflows: list[DataFlow]
    _valid_monitor: Monitor | None
    _stop_reason: str | None
    _stop_requested: bool
    _within_epoch: bool

    if TYPE_CHECKING:  # provided by TrainLoop and DisposableContext
        _has_entered: bool
        _is_entered: bool

    def component(self, role: str) -> Any:
        """The first plugged-in component with this `role` (``'checkpointer'``...), or None."""
        return next((c for c in self._components if c.role == role), None)

    def add_component(self, component: LoopComponent) -> None:
        """Plug `component` in, before entering (needed for a resumed state to
        reach it) or inside the ``with`` block (entered at once).

        Raises:
            TypeError: `component` is not a :class:`LoopComponent`.
            ValueError: It is added twice, or another has the same `state_key`.
            RuntimeError: The loop has been left, or an epoch loop is open.
        """
        if not isinstance(component, LoopComponent):
            raise TypeError(f'`component` must be a LoopComponent, got {component!r}')
        if self._has_entered and not self._is_entered:
            raise RuntimeError('Components cannot be added to a loop that has been left')
        if self._within_epoch:
            raise RuntimeError('Components must be added outside of the epoch loop')
        key = component.state_key
        for other in self._components:
            if other is component:
                raise ValueError(f'`component` {component!r} has been added already')
            if key and other.state_key == key:
                raise ValueError(
                    f'Two components have the state key {key!r}: {other!r} and {component!r}; '
                    f'pass `name=` to one of them so their checkpoint states are kept apart')
        component.on_attach(cast('TrainLoop', self))   # attach hook (issue 17)
        self._components.append(component)
        if self._is_entered:
            component.on_enter(cast('TrainLoop', self))

    def state_dict(self) -> dict[str, Any]:
        """The loop's persistent state as plain data (for checkpoints): counters, the
        best validation metric, the components' states and, inside an epoch, how
        far it went and where each DataFlow of :meth:`iter_steps` is."""
        state = self._progress.state_dict(self._dataflows)
        monitor = self._valid_monitor
        state['best_valid_metric'] = monitor.best if monitor else None
        state['valid_monitor'] = monitor.state_dict() if monitor else None
        state['stop_reason'] = self._stop_reason if self._stop_requested else None
        state['components'] = {c.state_key: c.state_dict()
                               for c in self._components if c.state_key}
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Put back a state from :meth:`state_dict`, before any epoch is opened
        (`KeyError` for a missing key, `RuntimeError` inside an epoch)."""
        missing = [k for k in ('epoch', 'step', 'best_valid_metric') if k not in state]
        if missing:
            raise KeyError(f'`state` lacks the required keys {missing}: got {sorted(state)}')
        if self._within_epoch:
            raise RuntimeError('`load_state_dict()` cannot be called while an epoch loop is open')
        self._progress.load_state_dict(state)
        if self._valid_monitor is not None:
            saved = state.get('valid_monitor') or {'best': state['best_valid_metric'], 'wait': 0}
            self._valid_monitor.load_state_dict(saved)
        if state.get('stop_reason') is not None:  # a stopped run stays stopped (everywhere)
            self._stop_requested, self._stop_reason = True, str(state['stop_reason'])
        saved_components = state.get('components') or {}
        for c in self._components:
            if c.state_key and c.state_key in saved_components:
                c.load_state_dict(saved_components[c.state_key])
