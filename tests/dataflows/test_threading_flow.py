"""ThreadingFlow (API.md 12.8, as changed by our docs).

Ours differs from the classic flow: the worker reads an epoch of the source
only when the consumer starts that epoch, a source exception is raised again
in the consumer (quirk Q8 fixed), leaving an epoch stops the worker's reading
within one batch, and ``close()`` joins the thread.

Every test body runs through :func:`within`, in a helper thread joined with a
timeout, so that a hang fails the test instead of blocking the suite.  The
only waits on events are bounded, and a "nothing more happens" check waits a
short while for an event that must not be set.
"""

import pickle
import re
import threading

import numpy as np
import pytest

from tfsnippet.dataflows import DataFlow, ThreadingFlow

TIMEOUT = 20.        # a test body that takes longer than this is a hang
QUIET = 0.3          # how long "nothing happens" is watched for


def within(fn, timeout=TIMEOUT):
    """Run `fn()` in a helper thread; fail if it has not finished in `timeout` s."""
    outcome = {}

    def target():
        try:
            outcome['value'] = fn()
        except BaseException as e:  # handed to the test thread below
            outcome['error'] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f'hang: not finished within {timeout} s'
    if 'error' in outcome:
        raise outcome['error']
    return outcome.get('value')


def lists(batches):
    return [tuple(a.tolist() for a in b) for b in batches]


def split(rows, batch_size):
    return [rows[i:i + batch_size] for i in range(0, len(rows), batch_size)]


class Counting:
    """An iterator factory of numbered one-array batches, with observable events.

    ``calls``: the factory calls; ``produced``: every item handed out;
    ``started[k]`` is set when epoch ``k`` (from 0) is started; ``closed`` when
    the source generator of an epoch is closed; ``overrun`` when more than
    `limit` items in all have been produced.  ``length=None`` is endless.
    """

    def __init__(self, length=None, limit=None, fail_at=None, epochs=8):
        self.length = length
        self.limit = limit
        self.fail_at = fail_at          # (epoch, index) where the source raises
        self.calls = 0
        self.produced = []
        self.started = [threading.Event() for _ in range(epochs)]
        self.closed = threading.Event()
        self.overrun = threading.Event()

    def __call__(self):
        epoch = self.calls
        self.calls += 1
        self.started[epoch].set()
        return self._generate(epoch)

    def _generate(self, epoch):
        try:
            i = 0
            while self.length is None or i < self.length:
                if self.fail_at == (epoch, i):
                    raise SourceError(f'bad row {i} of epoch {epoch}')
                self.produced.append((epoch, i))
                if self.limit is not None and len(self.produced) > self.limit:
                    self.overrun.set()
                yield (np.array([epoch * 100 + i]),)
                i += 1
        finally:
            self.closed.set()


class SourceError(Exception):
    pass


# ------------------------------------------------------------------- basics
def test_serves_the_batches_of_the_source():
    def body():
        source = DataFlow.arrays([np.arange(11), np.arange(11) * 2], 4, shuffle=True,
                                 random_state=12)
        flow = source.threaded(2)
        assert isinstance(flow, ThreadingFlow)
        assert flow.source is source
        assert flow.prefetch_num == 2
        rng = np.random.RandomState(12)
        with flow:
            for _ in range(3):
                perm = rng.permutation(11).tolist()
                assert lists(flow) == list(zip(split(perm, 4),
                                               split([2 * v for v in perm], 4)))
    within(body)


@pytest.mark.parametrize('prefetch', [1, 5])
def test_every_prefetch_gives_the_same_batches(prefetch):
    def body():
        flow = DataFlow.seq(0, 10, batch_size=3).threaded(prefetch)
        try:
            assert lists(flow) == [([0, 1, 2],), ([3, 4, 5],), ([6, 7, 8],), ([9],)]
            assert lists(flow) == [([0, 1, 2],), ([3, 4, 5],), ([6, 7, 8],), ([9],)]
        finally:
            flow.close()
    within(body)


def test_next_batch_and_current_batch():
    def body():
        with DataFlow.seq(0, 3, batch_size=2).threaded(1) as flow:
            assert flow.current_batch is None
            assert flow.next_batch()[0].tolist() == [0, 1]
            assert flow.next_batch()[0].tolist() == [2]
            assert flow.current_batch[0].tolist() == [2]
            with pytest.raises(StopIteration):
                flow.next_batch()
            assert flow.current_batch is None
            assert flow.next_batch()[0].tolist() == [0, 1]
        # leaving the block with an epoch half-read by next_batch does not hang
    within(body)


def test_iter_is_not_reentrant():
    def body():
        with DataFlow.seq(0, 6, batch_size=2).threaded(1) as flow:
            it = iter(flow)
            assert next(it)[0].tolist() == [0, 1]
            with pytest.raises(RuntimeError,
                               match=re.escape('ThreadingFlow.__iter__ is not reentrant.')):
                iter(flow)
            assert next(it)[0].tolist() == [2, 3]
            it.close()
            assert len(lists(flow)) == 3
    within(body)


# ------------------------------------------------------- per-epoch reading
def test_an_epoch_of_the_source_starts_only_when_the_consumer_starts_it():
    def body():
        source = Counting(length=3)
        flow = DataFlow.iterator_factory(source).threaded(2)
        with flow:   # the worker is running, but no epoch was asked for
            assert not source.started[0].wait(QUIET)
            assert lists(flow) == [([0],), ([1],), ([2],)]
            # the next epoch is not read ahead
            assert not source.started[1].wait(QUIET)
            assert source.calls == 1
            assert lists(flow) == [([100],), ([101],), ([102],)]
            assert not source.started[2].wait(QUIET)
            assert source.calls == 2
    within(body)


def test_state_changed_between_epochs_is_seen_by_the_whole_next_epoch():
    def body():
        scale = [1]
        flow = DataFlow.seq(0, 8, batch_size=2).map(lambda a: (a * scale[0],)).threaded(2)
        with flow:
            assert lists(flow) == [([0, 1],), ([2, 3],), ([4, 5],), ([6, 7],)]
            scale[0] = 10
            assert lists(flow) == [([0, 10],), ([20, 30],), ([40, 50],), ([60, 70],)]
    within(body)


def test_each_consumer_epoch_is_one_fresh_permutation_even_after_a_break():
    def body():
        rng = np.random.RandomState(21)
        perms = [rng.permutation(12).tolist() for _ in range(4)]
        with DataFlow.arrays([np.arange(12)], 5, shuffle=True,
                             random_state=21).threaded(3) as flow:
            for batch in flow:
                assert batch[0].tolist() == perms[0][:5]
                break
            assert lists(flow) == [(b,) for b in split(perms[1], 5)]
            for i, batch in enumerate(flow):
                assert batch[0].tolist() == split(perms[2], 5)[i]
                if i == 1:
                    break
            assert lists(flow) == [(b,) for b in split(perms[3], 5)]
    within(body)


# ---------------------------------------------------------- leaving early
def test_break_stops_the_reading_within_one_batch():
    def body():
        prefetch = 2
        # the consumer takes 3; the queue holds `prefetch`; one more may be in hand
        source = Counting(length=None, limit=3 + prefetch + 1)
        flow = DataFlow.iterator_factory(source).threaded(prefetch)
        with flow:
            for i, _ in enumerate(flow):
                if i == 2:
                    break
            assert source.closed.wait(TIMEOUT)
            assert not source.overrun.wait(QUIET)
            assert source.calls == 1
            assert len(source.produced) <= 3 + prefetch + 1
            # the next epoch is a new one
            it = iter(flow)
            assert next(it)[0].tolist() == [100]
            it.close()
    within(body)


def test_an_exception_in_the_consumer_stops_the_reading():
    def body():
        source = Counting(length=None, limit=1 + 1 + 1)
        with DataFlow.iterator_factory(source).threaded(1) as flow:
            with pytest.raises(KeyError):
                for _ in flow:
                    raise KeyError('consumer failed')
            assert source.closed.wait(TIMEOUT)
            assert not source.overrun.wait(QUIET)
            assert len(source.produced) <= 3
    within(body)


# ------------------------------------------------------------------ closing
def test_close_joins_the_thread():
    def body():
        before = threading.active_count()
        flow = DataFlow.seq(0, 10, batch_size=3).threaded(2)
        assert len(lists(flow)) == 4
        assert threading.active_count() == before + 1
        flow.close()
        assert threading.active_count() == before
        return True
    assert within(body)


def test_close_mid_epoch_stops_promptly():
    def body():
        before = threading.active_count()
        source = Counting(length=None)
        flow = DataFlow.iterator_factory(source).threaded(2)
        it = iter(flow)
        assert next(it)[0].tolist() == [0]
        flow.close()
        assert threading.active_count() == before
        assert source.closed.is_set()
        produced = len(source.produced)
        assert produced <= 1 + 2 + 1
        # the open epoch cannot go on, and says so instead of waiting forever
        with pytest.raises(RuntimeError, match=re.escape(
                'The ThreadingFlow was closed in the middle of an epoch')):
            next(it)
        assert len(source.produced) == produced
        # iterating again starts a new thread and a new epoch
        it2 = iter(flow)
        assert next(it2)[0].tolist() == [100]
        it2.close()
        flow.close()
        assert threading.active_count() == before
    within(body)


def test_with_block_starts_and_closes():
    def body():
        before = threading.active_count()
        with DataFlow.seq(0, 4, batch_size=2).threaded(1) as flow:
            assert threading.active_count() == before + 1
            for _ in flow:
                break
        assert threading.active_count() == before
        # usable again after the block
        assert lists(flow) == [([0, 1],), ([2, 3],)]
        flow.close()
        assert threading.active_count() == before
    within(body)


def test_close_without_use_and_twice():
    def body():
        before = threading.active_count()
        flow = DataFlow.seq(0, 4, batch_size=2).threaded(1)
        flow.close()
        flow.close()
        assert threading.active_count() == before
    within(body)


# ----------------------------------------------------------- source errors
def test_a_source_exception_is_raised_in_the_consumer():
    def body():
        source = Counting(length=4, fail_at=(0, 2))
        with DataFlow.iterator_factory(source).threaded(2) as flow:
            got = []
            with pytest.raises(SourceError, match=re.escape('bad row 2 of epoch 0')) as info:
                for batch in flow:
                    got.append(batch[0].tolist())
            # the batches before the failure were served
            assert got == [[0], [1]]
            notes = getattr(info.value, '__notes__', [])
            assert any('ThreadingFlow' in note for note in notes), notes
            # the flow is usable afterwards: the next epoch is complete
            assert lists(flow) == [([100],), ([101],), ([102],), ([103],)]
    within(body)


def test_a_source_exception_at_the_first_batch():
    def body():
        source = Counting(length=3, fail_at=(0, 0))
        with DataFlow.iterator_factory(source).threaded(1) as flow:
            with pytest.raises(SourceError, match=re.escape('bad row 0 of epoch 0')):
                next(iter(flow))
            assert lists(flow) == [([100],), ([101],), ([102],)]
    within(body)


def test_a_mapper_error_keeps_its_type_through_the_thread():
    def body():
        flow = DataFlow.seq(0, 4, batch_size=2).map(lambda a: a).threaded(1)
        try:
            with pytest.raises(TypeError, match=re.escape('is expected to be a tuple or a '
                                                          'list, but got a ndarray.')):
                list(flow)
        finally:
            flow.close()
    within(body)


def test_threads_are_joined_after_a_source_error():
    def body():
        before = threading.active_count()
        flow = DataFlow.iterator_factory(Counting(length=2, fail_at=(0, 1))).threaded(1)
        with pytest.raises(SourceError):
            list(flow)
        flow.close()
        assert threading.active_count() == before
    within(body)


# -------------------------------------------------------------- resumability
def test_resume_a_threaded_mapped_flow_mid_epoch():
    def make(seed):
        return DataFlow.arrays([np.arange(19), np.arange(19) * 3], 4, shuffle=True,
                               random_state=seed).map(lambda x, y: (x + y, x)).threaded(3)

    def body():
        reference = make(1)
        with reference:
            expected = [lists(reference) for _ in range(4)]
        flow = make(1)
        with flow:
            assert lists(flow) == expected[0]
            it = iter(flow)
            assert lists([next(it), next(it)]) == expected[1][:2]
            # the worker has read ahead; the position is the consumer's
            state = pickle.loads(pickle.dumps(flow.state_dict()))
            assert set(state) == {'start', 'served'}
            assert state['served'] == 2
            it.close()
        resumed = make(2)
        assert resumed.is_resumable
        with resumed:
            resumed.load_state_dict(state)
            assert lists(resumed) == expected[1][2:]
            assert lists(resumed) == expected[2]
            assert lists(resumed) == expected[3]
    within(body)


def test_resume_a_threaded_flow_into_an_unthreaded_one():
    def body():
        flow = DataFlow.seq(0, 10, batch_size=2, shuffle=True, random_state=4).threaded(2)
        with flow:
            it = iter(flow)
            first = lists([next(it)])
            state = flow.state_dict()
            it.close()
        perm = np.random.RandomState(4).permutation(10).tolist()
        assert first == [(perm[:2],)]
        plain = DataFlow.seq(0, 10, batch_size=2, shuffle=True, random_state=0)
        plain.load_state_dict(state)
        assert lists(plain) == [(b,) for b in split(perm, 2)[1:]]
    within(body)
