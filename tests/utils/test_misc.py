"""Tests of `humanize_duration` and `ETA` (API.md section 13.4)."""

import numpy as np
import pytest

from tfsnippet.utils import ETA, humanize_duration
from tests.helpers import FakeClock


# ----------------------------------------------------------- humanize_duration
@pytest.mark.parametrize('seconds, expected', [
    (0, '0s'),
    (0., '0s'),
    (1e-8, '1e-08s'),
    (0.0123, '0.0123s'),
    (1, '1s'),
    (2.31, '2.31s'),
    (59.9, '59.9s'),
    (60, '1m'),
    (61, '1m 1s'),
    (65, '1m 5s'),
    (1234.5, '20m 34.5s'),
    (3600, '1h'),
    (3660, '1h 1m'),
    (3601, '1h 1s'),
    (3661.5, '1h 1m 1.5s'),
    (86400, '1d'),
    (86401, '1d 1s'),
    (90061, '1d 1h 1m 1s'),
    (172799, '1d 23h 59m 59s'),
    (172800, '2d'),
    (12.34567, '12.35s'),     # seconds keep 4 significant digits
    (-0.5, '0.5s ago'),
    (-61, '1m 1s ago'),
    (-3600, '1h ago'),
    (np.float32(2.5), '2.5s'),
    (np.int64(120), '2m'),
])
def test_humanize_duration_short_units(seconds, expected):
    assert humanize_duration(seconds) == expected
    assert humanize_duration(seconds, short_units=True) == expected


@pytest.mark.parametrize('seconds, expected', [
    # singular up to one second, as in the classic version
    (0, '0 second'),
    (1e-8, '1e-08 second'),
    (0.1, '0.1 second'),
    (0.5, '0.5 second'),
    (1, '1 second'),
    (1.1, '1.1 seconds'),
    (2, '2 seconds'),
    (60, '1 minute'),
    (61, '1 minute 1 second'),
    (120, '2 minutes'),
    (121.5, '2 minutes 1.5 seconds'),
    (3600, '1 hour'),
    (7322, '2 hours 2 minutes 2 seconds'),
    (86400, '1 day'),
    (90061, '1 day 1 hour 1 minute 1 second'),
    (172799, '1 day 23 hours 59 minutes 59 seconds'),
    (172800, '2 days'),
    (-1, '1 second ago'),
    (-120, '2 minutes ago'),
    (-172800, '2 days ago'),
])
def test_humanize_duration_long_units(seconds, expected):
    assert humanize_duration(seconds, short_units=False) == expected


# ------------------------------------------------------------------------- ETA
def test_eta_from_explicit_times():
    eta = ETA(clock=FakeClock(0.))
    eta.take_snapshot(0., now=0.)
    # 1 second for a quarter: 3 more seconds for the remaining three quarters
    assert eta.get_eta(.25, now=1.) == pytest.approx(3.)
    # the estimate always extrapolates from the first snapshot (0, 0)
    assert eta.get_eta(.01, now=1.) == pytest.approx(99.)
    assert eta.get_eta(1., now=7.) == pytest.approx(0.)


def test_eta_uses_the_first_snapshot_not_the_latest():
    eta = ETA(clock=FakeClock(0.))
    eta.take_snapshot(0., now=0.)
    eta.take_snapshot(.5, now=100.)
    # from (0, 0): 101 s for 75 % -> 101 / .75 * .25
    assert eta.get_eta(.75, now=101.) == pytest.approx(101. / 3)


def test_eta_is_none_when_progress_has_not_moved():
    eta = ETA(take_initial_snapshot=False, clock=FakeClock(0.))
    eta.take_snapshot(.5, now=0.)
    assert eta.get_eta(.5, now=10.) is None
    assert eta.get_eta(.5 + 5e-8, now=10.) is None  # moved less than 1e-7
    assert eta.get_eta(.75, now=10.) == pytest.approx(10.)


def test_eta_with_injected_fake_clock(fake_clock):
    eta = ETA(clock=fake_clock)
    eta.take_snapshot(0.)  # at t = 1000
    fake_clock.advance(10.)
    assert eta.get_eta(.5) == pytest.approx(10.)
    fake_clock.advance(10.)
    # 20 s for 80 %: 5 s left
    assert eta.get_eta(.8) == pytest.approx(5.)


def test_eta_explicit_now_overrides_the_clock(fake_clock):
    eta = ETA(clock=fake_clock)
    eta.take_snapshot(0., now=1000.)
    fake_clock.advance(500.)
    assert eta.get_eta(.5, now=1004.) == pytest.approx(4.)


def test_eta_takes_initial_snapshot_by_default(fake_clock):
    # API.md 13.4: ETA(take_initial_snapshot=True) records (0, now) when built.
    eta = ETA(clock=fake_clock)
    fake_clock.advance(1.)
    assert eta.get_eta(.25) == pytest.approx(3.)


def test_eta_without_initial_snapshot_first_estimate_is_none(fake_clock):
    eta = ETA(take_initial_snapshot=False, clock=fake_clock)
    fake_clock.advance(100.)
    assert eta.get_eta(.1) is None          # no snapshot yet; this one takes it
    fake_clock.advance(5.)
    # from (0.1, 1100): 5 s for 0.5 of progress, 0.4 left -> 4 s
    assert eta.get_eta(.6) == pytest.approx(4.)


def test_eta_get_eta_without_taking_snapshot(fake_clock):
    eta = ETA(take_initial_snapshot=False, clock=fake_clock)
    assert eta.get_eta(.1, take_snapshot=False) is None
    fake_clock.advance(5.)
    assert eta.get_eta(.6, take_snapshot=False) is None  # still no snapshot
    fake_clock.advance(5.)
    eta.take_snapshot(.6)
    fake_clock.advance(2.)
    assert eta.get_eta(.8) == pytest.approx(2.)


def test_package_exports_every_public_name_of_its_parts_lazily():
    import subprocess
    import sys

    import tfsnippet as spt
    from tfsnippet import dataflows, experiment, scaffold, trainer
    expected = (set(scaffold.__all__) | set(trainer.__all__) | set(experiment.__all__) |
                {'DataFlow', 'DataMapper', 'SlidingWindow', 'settings',
                 'Search',    # `spt.Search` from tfsnippet.search (Optuna, imported when used)
                 'seed_everything'})  # from tfsnippet.tfops
    assert set(spt._EXPORTS) == expected
    for name in expected:
        assert getattr(spt, name) is not None
    assert spt.dataflows is dataflows
    # `import tfsnippet` alone does not import TensorFlow
    code = 'import sys, tfsnippet, tfsnippet.distributed; print("tensorflow" in sys.modules)'
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.strip() == 'False'
