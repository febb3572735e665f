"""Tests of `EventSource`, `EventHandle` and `EventKeys` (API.md sections 2 and 13.1)."""

import re

import pytest

from tfsnippet import EventKeys
from tfsnippet.utils import EventHandle, EventSource


class Recorder:
    """Handlers that append ``(label, args, kwargs)`` to one shared list."""

    def __init__(self):
        self.calls = []

    def handler(self, label):
        def h(*args, **kwargs):
            self.calls.append((label, args, kwargs))
        h.__name__ = f'handler_{label}'
        return h


# ----------------------------------------------------------------- registration
def test_fire_calls_handlers_in_registration_order_with_args():
    rec = Recorder()
    events = EventSource()
    events.on('ev', rec.handler('a'))
    events.on('ev', rec.handler('b'))
    events.on('other', rec.handler('c'))

    assert events.fire('ev', 1, 2, x=3) is None
    assert rec.calls == [('a', (1, 2), {'x': 3}), ('b', (1, 2), {'x': 3})]


def test_reverse_fire_calls_handlers_in_reverse_registration_order():
    rec = Recorder()
    events = EventSource()
    for label in 'abc':
        events.on('ev', rec.handler(label))

    assert events.reverse_fire('ev', 'arg', k='v') is None
    assert [c[0] for c in rec.calls] == ['c', 'b', 'a']
    assert rec.calls[0] == ('c', ('arg',), {'k': 'v'})


def test_duplicate_registration_runs_the_handler_twice():
    rec = Recorder()
    events = EventSource()
    h = rec.handler('a')
    events.on('ev', h)
    events.on('ev', h)

    events.fire('ev')
    assert [c[0] for c in rec.calls] == ['a', 'a']


def test_fire_of_key_without_handlers_does_nothing():
    restricted = EventSource(['ev'])
    restricted.fire('ev', 1)
    restricted.reverse_fire('ev', 1)
    unrestricted = EventSource()
    unrestricted.fire('anything', 1)
    unrestricted.reverse_fire('anything', 1)
    assert not restricted.has_handlers('ev')
    assert not unrestricted.has_handlers('anything')


def test_has_handlers():
    events = EventSource(['ev', 'other'])
    h = events.on('ev', lambda: None)
    assert events.has_handlers('ev')
    assert not events.has_handlers('other')
    h.remove()
    assert not events.has_handlers('ev')


def test_on_rejects_non_callable_handler():
    events = EventSource()
    expected = '`handler` must be callable, got 123'
    with pytest.raises(TypeError, match='^' + re.escape(expected) + '$'):
        events.on('ev', 123)
    assert not events.has_handlers('ev')


# ---------------------------------------------------------------- allowed keys
def test_allowed_event_keys_are_exposed_as_strings():
    assert EventSource().allowed_event_keys is None
    assert EventSource(['a', 'b']).allowed_event_keys == frozenset({'a', 'b'})
    assert EventSource([EventKeys.AFTER_STEP]).allowed_event_keys == frozenset({'after_step'})


def key_error_pattern(message):
    # str() of a KeyError is the repr of its message
    return '^' + re.escape(repr(message)) + '$'


NOT_ALLOWED = key_error_pattern("`event_key` is not allowed: 'typo'; expected one of ['a', 'b']")


def test_on_with_disallowed_key_raises():
    events = EventSource(['b', 'a'])
    with pytest.raises(KeyError, match=NOT_ALLOWED):
        events.on('typo', lambda: None)


def test_off_with_disallowed_key_raises():
    events = EventSource(['a', 'b'])
    with pytest.raises(KeyError, match=NOT_ALLOWED):
        events.off('typo', lambda: None)


def test_fire_with_disallowed_key_raises():
    events = EventSource(['a', 'b'])
    with pytest.raises(KeyError, match=NOT_ALLOWED):
        events.fire('typo')


def test_reverse_fire_with_disallowed_key_raises():
    events = EventSource(['a', 'b'])
    with pytest.raises(KeyError, match=NOT_ALLOWED):
        events.reverse_fire('typo')


def test_has_handlers_with_disallowed_key_raises():
    events = EventSource(['a', 'b'])
    with pytest.raises(KeyError, match=NOT_ALLOWED):
        events.has_handlers('typo')


def test_keys_are_compared_as_strings():
    rec = Recorder()
    events = EventSource([1, 'two'])
    events.on('1', rec.handler('str'))
    events.on(1, rec.handler('int'))

    events.fire(1)
    events.fire('1')
    assert [c[0] for c in rec.calls] == ['str', 'int', 'str', 'int']


def test_event_keys_members_and_their_values_are_interchangeable():
    rec = Recorder()
    events = EventSource(EventKeys)
    by_member = rec.handler('member')
    events.on(EventKeys.AFTER_STEP, by_member)
    events.on('after_step', rec.handler('string'))

    events.reverse_fire('after_step', 'loop')
    events.fire(EventKeys.AFTER_STEP, 'loop')
    assert [c[0] for c in rec.calls] == ['string', 'member', 'member', 'string']

    events.off('after_step', by_member)
    rec.calls.clear()
    events.fire(EventKeys.AFTER_STEP, 'loop')
    assert [c[0] for c in rec.calls] == ['string']


def test_event_source_built_from_event_keys_rejects_other_keys():
    events = EventSource(EventKeys)
    expected = ("`event_key` is not allowed: 'after_stpe'; expected one of "
                f'{sorted(key.value for key in EventKeys)}')
    with pytest.raises(KeyError, match=key_error_pattern(expected)):
        events.on('after_stpe', lambda loop: None)


# ------------------------------------------------------------------------ off
def test_off_removes_the_first_registration_only():
    rec = Recorder()
    events = EventSource()
    a, b = rec.handler('a'), rec.handler('b')
    events.on('ev', a)
    events.on('ev', b)
    events.on('ev', a)

    events.off('ev', a)
    events.fire('ev')
    assert [c[0] for c in rec.calls] == ['b', 'a']


def test_off_of_unregistered_handler_raises():
    events = EventSource()
    events.on('ev', print)

    def handler():
        pass

    expected = f'`handler` is not a registered event handler of event `ev`: {handler!r}'
    with pytest.raises(ValueError, match=f'^{re.escape(expected)}$'):
        events.off('ev', handler)


def test_off_of_handler_registered_under_another_key_raises():
    events = EventSource()
    events.on('other', print)
    expected = f'`handler` is not a registered event handler of event `ev`: {print!r}'
    with pytest.raises(ValueError, match=f'^{re.escape(expected)}$'):
        events.off('ev', print)


# ---------------------------------------------------------------- EventHandle
def test_on_returns_a_handle_that_removes_the_handler():
    rec = Recorder()
    events = EventSource()
    handle = events.on('ev', rec.handler('a'))
    events.on('ev', rec.handler('b'))

    assert isinstance(handle, EventHandle)
    assert not handle.removed
    handle.remove()
    assert handle.removed

    events.fire('ev')
    assert [c[0] for c in rec.calls] == ['b']


def test_handle_remove_twice_does_nothing_the_second_time():
    rec = Recorder()
    events = EventSource()
    h = rec.handler('a')
    handle = events.on('ev', h)
    events.on('ev', h)

    handle.remove()
    handle.remove()  # must not take the second registration away too
    events.fire('ev')
    assert [c[0] for c in rec.calls] == ['a']


def test_handle_as_context_manager_removes_handler_on_exit():
    rec = Recorder()
    events = EventSource()
    with events.on('ev', rec.handler('a')) as handle:
        assert isinstance(handle, EventHandle)
        events.fire('ev')
    events.fire('ev')

    assert handle.removed
    assert [c[0] for c in rec.calls] == ['a']


def test_handle_as_context_manager_removes_handler_when_block_raises():
    rec = Recorder()
    events = EventSource()
    with pytest.raises(ZeroDivisionError):
        with events.on('ev', rec.handler('a')):
            1 / 0
    events.fire('ev')
    assert rec.calls == []


def test_handle_remove_after_handlers_were_cleared_does_not_raise():
    events = EventSource()
    rec = Recorder()
    with events.on('ev', rec.handler('a')):
        events.clear_event_handlers()
    events.fire('ev')
    assert rec.calls == []


# ------------------------------------------------------------------ exceptions
def test_handler_exception_propagates_and_skips_the_remaining_handlers():
    rec = Recorder()
    events = EventSource()

    def bad(*args):
        raise RuntimeError('handler failed')

    events.on('ev', rec.handler('a'))
    events.on('ev', bad)
    events.on('ev', rec.handler('c'))

    with pytest.raises(RuntimeError, match='^handler failed$'):
        events.fire('ev')
    assert [c[0] for c in rec.calls] == ['a']

    rec.calls.clear()
    with pytest.raises(RuntimeError, match='^handler failed$'):
        events.reverse_fire('ev')
    assert [c[0] for c in rec.calls] == ['c']


def test_handler_removing_itself_while_firing_does_not_skip_the_next_one():
    # API.md 13.1 says the classic code did not copy the handler list, so a
    # handler that removed itself made the next one be skipped.  With
    # removable handles ("run once" handlers) the rewrite fires a snapshot.
    rec = Recorder()
    events = EventSource()
    handles = []

    def once():
        rec.calls.append(('once', (), {}))
        handles[0].remove()

    handles.append(events.on('ev', once))
    events.on('ev', rec.handler('next'))

    events.fire('ev')
    events.fire('ev')
    assert [c[0] for c in rec.calls] == ['once', 'next', 'next']


# ------------------------------------------------------ clear_event_handlers
def test_clear_event_handlers_of_one_key():
    rec = Recorder()
    events = EventSource(['a', 'b'])
    events.on('a', rec.handler('a'))
    events.on('b', rec.handler('b'))

    events.clear_event_handlers('a')
    events.fire('a')
    events.fire('b')
    assert [c[0] for c in rec.calls] == ['b']


def test_clear_event_handlers_of_all_keys():
    rec = Recorder()
    events = EventSource()
    events.on('a', rec.handler('a'))
    events.on('b', rec.handler('b'))

    events.clear_event_handlers()
    events.fire('a')
    events.fire('b')
    assert rec.calls == []
    # the source is still usable afterwards
    events.on('a', rec.handler('again'))
    events.fire('a')
    assert [c[0] for c in rec.calls] == ['again']


def test_clear_event_handlers_of_unknown_key_is_allowed():
    rec = Recorder()
    events = EventSource(['a'])
    events.on('a', rec.handler('a'))
    events.clear_event_handlers('unknown')
    events.fire('a')
    assert [c[0] for c in rec.calls] == ['a']


def test_clear_event_handlers_accepts_event_keys_member():
    rec = Recorder()
    events = EventSource(EventKeys)
    events.on('before_epoch', rec.handler('a'))
    events.clear_event_handlers(EventKeys.BEFORE_EPOCH)
    events.fire(EventKeys.BEFORE_EPOCH)
    assert rec.calls == []


# ------------------------------------------------------------------ EventKeys
@pytest.mark.parametrize('member, value', [
    ('ENTER_LOOP', 'enter_loop'),
    ('EXIT_LOOP', 'exit_loop'),
    ('BEFORE_EPOCH', 'before_epoch'),
    ('AFTER_EPOCH', 'after_epoch'),
    ('BEFORE_STEP', 'before_step'),
    ('AFTER_STEP', 'after_step'),
    ('METRICS_COLLECTED', 'metrics_collected'),
    ('TIME_METRICS_COLLECTED', 'time_metrics_collected'),
    ('METRIC_STATS_PRINTED', 'metric_stats_printed'),
    ('TIME_METRIC_STATS_PRINTED', 'time_metric_stats_printed'),
    ('METRIC_STATS_REDUCED', 'metric_stats_reduced'),
    ('SUMMARY_ADDED', 'summary_added'),
    ('STEP_EVALUATION', 'step_evaluation'),
    ('STEP_ANNEALING', 'step_annealing'),
    ('STEP_LOGGING', 'step_logging'),
    ('EPOCH_EVALUATION', 'epoch_evaluation'),
    ('EPOCH_ANNEALING', 'epoch_annealing'),
    ('EPOCH_LOGGING', 'epoch_logging'),
    ('BEFORE_EXECUTION', 'before_execution'),
    ('AFTER_EXECUTION', 'after_execution'),
    ('BEFORE_STEPS', 'before_steps'),
    ('AFTER_STEPS', 'after_steps'),
    ('LOGS_PRINTING', 'logs_printing'),
    ('LOOP_HELD', 'loop_held'),
])
def test_event_keys_values(member, value):
    key = getattr(EventKeys, member)
    assert key == value
    assert str(key) == value
    assert hash(key) == hash(value)
    assert EventKeys(value) is key


def test_event_keys_has_exactly_the_documented_members():
    assert len(EventKeys) == 24
