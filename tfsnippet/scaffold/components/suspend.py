"""What a component that writes something lasting offers: its writes can be suspended."""

from __future__ import annotations

__all__ = ['SuspendableWrites']


class SuspendableWrites:
    """A mix-in of the components that write something lasting (checkpoints,
    summaries, metric sinks and results stores): :meth:`suspend_writes` makes
    them write nothing until :meth:`resume_writes`.

    A :class:`~tfsnippet.QuickCheck` finds them by this type and suspends
    them, so that a dry run leaves no file behind.  A component suspended
    before the loop is entered opens no folder and no writer; it still
    reads (a checkpoint is still resumed).
    """

    _writes_suspended: str | None = None

    @property
    def writes_suspended(self) -> str | None:
        """Why the writes are suspended, or ``None`` when they are not."""
        return self._writes_suspended

    def suspend_writes(self, reason: str) -> None:
        """Write nothing lasting from now on, because of `reason` (shown in messages).

        Raises:
            TypeError: `reason` is not a non-empty str.
        """
        if not isinstance(reason, str) or not reason:
            raise TypeError(f'`reason` must be a non-empty str, got {reason!r}')
        self._writes_suspended = reason

    def resume_writes(self) -> None:
        """Write again."""
        self._writes_suspended = None
