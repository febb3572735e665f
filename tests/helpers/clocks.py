"""Fake clocks: time moves only when a test says so."""


class FakeClock:
    """A clock that moves only when told: ``clock.advance(seconds)``."""

    def __init__(self, start: float = 1000.):
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
