"""Tests of the lifecycle concepts (API.md section 13.3)."""

import re

import pytest

from tfsnippet.utils import (AutoInitAndCloseable, Disposable, DisposableContext,
                             NoReentrantContext)


# --------------------------------------------------------- AutoInitAndCloseable
class Resource(AutoInitAndCloseable):
    def __init__(self, fail_close=False):
        self.log = []
        self.fail_close = fail_close

    def _init(self):
        self.log.append('init')

    def _close(self):
        self.log.append('close')
        if self.fail_close:
            raise IOError('close failed')


def test_init_runs_once_until_closed():
    r = Resource()
    r.init()
    r.init()
    assert r.log == ['init']
    r.close()
    r.close()
    assert r.log == ['init', 'close']
    r.init()
    assert r.log == ['init', 'close', 'init']


def test_close_without_init_does_nothing():
    r = Resource()
    r.close()
    assert r.log == []


def test_close_marks_uninitialized_even_if_close_raises():
    r = Resource(fail_close=True)
    r.init()
    with pytest.raises(IOError, match='^close failed$'):
        r.close()
    r.close()  # not initialized any more: _close is not called again
    assert r.log == ['init', 'close']
    r.init()
    assert r.log == ['init', 'close', 'init']


def test_failed_init_leaves_object_uninitialized():
    class Failing(Resource):
        def _init(self):
            self.log.append('init')
            raise ValueError('init failed')

    r = Failing()
    with pytest.raises(ValueError, match='^init failed$'):
        r.init()
    r.close()
    assert r.log == ['init']


def test_with_block_inits_and_closes_and_returns_self():
    r = Resource()
    with r as entered:
        assert entered is r
        assert r.log == ['init']
    assert r.log == ['init', 'close']


def test_nested_with_blocks_have_no_reference_counting():
    r = Resource()
    with r:
        with r:
            assert r.log == ['init']
        assert r.log == ['init', 'close']  # the inner block closed it
    assert r.log == ['init', 'close']


def test_with_block_closes_when_body_raises():
    r = Resource()
    with pytest.raises(KeyError):
        with r:
            raise KeyError('x')
    assert r.log == ['init', 'close']


# ------------------------------------------------------------------ Disposable
class OneShot(Disposable):
    def __repr__(self):
        return 'OneShot()'

    def use(self):
        self._check_usage_and_set_used()
        return 'used'


def test_disposable_can_be_used_once():
    obj = OneShot()
    assert obj.use() == 'used'


def test_disposable_used_twice_raises():
    obj = OneShot()
    obj.use()
    expected = 'Disposable object cannot be used twice: OneShot().'
    with pytest.raises(RuntimeError, match='^' + re.escape(expected) + '$'):
        obj.use()


# ---------------------------------------------------------- NoReentrantContext
class Ctx(NoReentrantContext):
    def __init__(self, enter_result='entered', exit_result=None, fail_enter=False):
        self.log = []
        self.enter_result = enter_result
        self.exit_result = exit_result
        self.fail_enter = fail_enter

    def __repr__(self):
        return 'Ctx()'

    def _enter(self):
        self.log.append('enter')
        if self.fail_enter:
            raise ValueError('enter failed')
        return self.enter_result

    def _exit(self, exc_type, exc_val, exc_tb):
        self.log.append(('exit', exc_type))
        return self.exit_result

    def work(self):
        self._require_entered()
        return 'worked'


def test_enter_returns_result_of_underscore_enter():
    ctx = Ctx(enter_result=456)
    with ctx as value:
        assert value == 456
        assert ctx._is_in_context
    assert not ctx._is_in_context
    assert ctx.log == ['enter', ('exit', None)]


def test_no_reentrant_context_can_be_entered_again_after_exit():
    ctx = Ctx()
    with ctx:
        pass
    with ctx:
        pass
    assert ctx.log == ['enter', ('exit', None), 'enter', ('exit', None)]


def test_entering_while_entered_raises():
    ctx = Ctx()
    with ctx:
        with pytest.raises(RuntimeError,
                           match='^' + re.escape('Context is not reentrant: Ctx().') + '$'):
            with ctx:
                pass
        # the failed re-entry neither called _enter nor left the context
        assert ctx.log == ['enter']
        assert ctx.work() == 'worked'
    assert ctx.log == ['enter', ('exit', None)]


def test_require_entered_outside_context_raises():
    ctx = Ctx()
    with pytest.raises(RuntimeError,
                       match='^' + re.escape('Ctx() must be entered first: call this inside its '
                                             '`with` block') + '$'):
        ctx.work()


def test_require_entered_inside_context_passes():
    ctx = Ctx()
    with ctx:
        assert ctx.work() == 'worked'


def test_failed_enter_does_not_mark_entered_and_skips_exit():
    ctx = Ctx(fail_enter=True)
    with pytest.raises(ValueError, match='^enter failed$'):
        with ctx:
            pass  # pragma: no cover - not reached
    assert ctx.log == ['enter']
    assert not ctx._is_in_context
    ctx.fail_enter = False
    with ctx:
        pass
    assert ctx.log == ['enter', 'enter', ('exit', None)]


def test_exit_without_enter_does_not_call_underscore_exit():
    ctx = Ctx()
    assert ctx.__exit__(None, None, None) is None
    assert ctx.log == []


def test_exit_receives_exception_and_falsy_result_lets_it_propagate():
    ctx = Ctx(exit_result=None)
    with pytest.raises(KeyError):
        with ctx:
            raise KeyError('k')
    assert ctx.log == ['enter', ('exit', KeyError)]
    assert not ctx._is_in_context


def test_truthy_exit_result_swallows_exception():
    ctx = Ctx(exit_result=True)
    with ctx:
        raise KeyError('k')
    assert ctx.log == ['enter', ('exit', KeyError)]


# ------------------------------------------------------------ DisposableContext
class OnceCtx(DisposableContext):
    def __init__(self):
        self.log = []

    def __repr__(self):
        return 'OnceCtx()'

    def _enter(self):
        self.log.append('enter')
        return 123

    def _exit(self, exc_type, exc_val, exc_tb):
        self.log.append('exit')


def test_disposable_context_enter_returns_underscore_enter_result():
    ctx = OnceCtx()
    with ctx as value:
        assert value == 123
    assert ctx.log == ['enter', 'exit']


def test_disposable_context_entered_twice_raises():
    ctx = OnceCtx()
    with ctx:
        pass
    expected = 'A disposable context cannot be entered twice: OnceCtx().'
    with pytest.raises(RuntimeError, match='^' + re.escape(expected) + '$'):
        with ctx:
            pass  # pragma: no cover - not reached
    assert ctx.log == ['enter', 'exit']


def test_disposable_context_entered_again_while_entered_raises():
    ctx = OnceCtx()
    expected = 'A disposable context cannot be entered twice: OnceCtx().'
    with ctx:
        with pytest.raises(RuntimeError, match='^' + re.escape(expected) + '$'):
            with ctx:
                pass  # pragma: no cover - not reached
    assert ctx.log == ['enter', 'exit']


def test_disposable_context_may_be_entered_after_a_failed_first_enter():
    class FailOnce(OnceCtx):
        failed = False

        def _enter(self):
            if not self.failed:
                self.failed = True
                raise ValueError('first enter failed')
            return super()._enter()

    ctx = FailOnce()
    with pytest.raises(ValueError, match='^first enter failed$'):
        with ctx:
            pass  # pragma: no cover - not reached
    with ctx as value:
        assert value == 123
    assert ctx.log == ['enter', 'exit']
