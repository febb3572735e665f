"""A resumed epoch's statistics are those of the whole epoch, as an uninterrupted run's.

The checkpoint of a step inside an epoch keeps the epoch's statistics so far
(the metric book's, the epoch's and the running step's seconds): every line,
callback and sink of the resumed epoch gets what an uninterrupted run gets.
Each test runs one job uninterrupted, and once interrupted (an exception at
step 13, after the checkpoint of step 7 or 10) then resumed, on a fake clock
that moves one second per step, so even the times match.  The SIGKILL
version, with Keras callbacks and a results store, is
tests/test_resume_statistics_killed.py.
"""

import pytest

import tfsnippet as spt
from tests.helpers import FakeClock

STEPS = 10
MAX_EPOCH = 3


class Rows(spt.MetricSink):
    """Keeps every ``write_stats`` call as ``(scope, step, epoch, stats)``."""

    def __init__(self):
        self.rows = []

    def write_stats(self, scope, step, epoch, stats):
        self.rows.append((scope, step, epoch, stats))


def loss_of(step):
    return (step * 0.37) % 1.3 + 0.01 * step


class Model:
    """One variable counting the steps done (one per test: a graph names variables once)."""

    def __init__(self, style):
        self.style = style
        self.w = style.variable(0., 'w')
        self.add_one = style.updater(self.w, 1.)

    def reset(self):
        self.style.updater(self.w, -float(self.style.value(self.w)))()


def run(model, root, lines, rows, step_freq, interrupt_at=None):
    """One attempt, from w = 0; return the trained variable's value."""
    clock = FakeClock()
    model.reset()
    w, add_one = model.w, model.add_one
    loop = spt.TrainLoop({'w': w}, max_epoch=MAX_EPOCH, checkpoint_dir=str(root),
                         checkpoint_step_freq=step_freq, print_func=lines.append,
                         show_eta=False, clock=clock)
    loop.add_component(spt.MetricRecorder(rows, scopes=('step_log', 'epoch_log', 'epoch')))
    with loop:
        for epoch in loop.iter_epochs():
            loop.collect_metrics(lr=0.1 / epoch)   # outside the steps
            for step, _ in loop.iter_steps(range(STEPS)):
                add_one()
                clock.advance(1.)
                loop.collect_metrics(loss=loss_of(step))
                if step % 5 == 0:
                    loop.print_logs()
                if step == interrupt_at:
                    raise KeyboardInterrupt()
            loop.collect_metrics(valid_loss=1. / epoch)
            loop.print_logs()
    return model.style.value(w)


def reference(model, tmp_path, step_freq):
    lines, rows = [], Rows()
    weight = run(model, tmp_path / 'reference', lines, rows, step_freq)
    return lines, rows.rows, weight


@pytest.mark.parametrize('step_freq,resumed_at', [(7, 7), (5, 10)])
def test_a_resumed_epoch_prints_and_sends_the_statistics_of_the_whole_epoch(
        style, tmp_path, step_freq, resumed_at):
    model = Model(style)
    want_lines, want_rows, want_weight = reference(model, tmp_path, step_freq)
    killed_lines, killed = [], Rows()
    with pytest.raises(KeyboardInterrupt):
        run(model, tmp_path / 'run', killed_lines, killed, step_freq, interrupt_at=13)
    lines, resumed = [], Rows()
    weight = run(model, tmp_path / 'run', lines, resumed, step_freq)

    assert lines[0].startswith(f'Resume training: epoch 1, step {resumed_at}, ')
    # everything after the checkpoint is what the uninterrupted run printed and sent
    # (the step lines of steps up to the checkpoint's came before it)
    sent_before = sum(1 for row in want_rows if row[0] == 'step_log' and row[1] <= resumed_at)
    assert lines[1:] == want_lines[sent_before:]
    assert resumed.rows == want_rows[sent_before:]
    epoch_1 = [row for row in resumed.rows if row[0] == 'epoch' and row[2] == 1][0][3]
    assert epoch_1['loss']['count'] == STEPS
    assert epoch_1['loss']['mean'] == pytest.approx(
        sum(loss_of(s) for s in range(1, STEPS + 1)) / STEPS, rel=1e-12)
    assert epoch_1['step_time'] == {'mean': 1., 'std': 0., 'count': STEPS}
    assert epoch_1['epoch_time']['mean'] == STEPS
    assert epoch_1['lr']['mean'] == 0.1
    assert weight == want_weight == MAX_EPOCH * STEPS


def test_a_checkpoint_without_the_partial_statistics_still_resumes(style, tmp_path):
    """A state of an earlier version (no ``epoch_metrics``) resumes as before: the
    epoch's statistics start at the resume."""
    lines = []
    loop = spt.TrainLoop(max_epoch=1, print_func=lines.append, show_eta=False)
    with loop:
        loop.load_state_dict({'epoch': 1, 'step': 7, 'best_valid_metric': None,
                              'epoch_steps': 7, 'dataflows': []})
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(STEPS)):
                loop.collect_metrics(loss=float(step))
            loop.print_logs()
    assert lines[-1].startswith('[Step 10] epoch time: ')
    assert lines[-1].endswith('; loss: 9 (±0.816497)')   # steps 8 to 10


class HeldRows(Rows):
    """A sink that keeps its rows across attempts and drops the replayed ones."""

    def __init__(self):
        super().__init__()
        self.told = []

    def resumed(self, step, epoch):
        self.told.append((step, epoch))
        self.rows = [row for row in self.rows
                     if (row[1] <= step if row[0] == 'step_log' else row[2] < epoch)]


@pytest.mark.parametrize('step_freq,told', [(7, (7, 1)), (5, (10, 1))])
def test_a_sink_told_of_the_resume_holds_each_epoch_once(style, tmp_path, step_freq, told):
    model = Model(style)
    _, want_rows, _ = reference(model, tmp_path, step_freq)
    held = HeldRows()
    with pytest.raises(KeyboardInterrupt):   # epoch 1's line was sent after the checkpoint
        run(model, tmp_path / 'run', [], held, step_freq, interrupt_at=13)
    assert held.told == []
    run(model, tmp_path / 'run', [], held, step_freq)
    assert held.told == [told]
    assert held.rows == want_rows
