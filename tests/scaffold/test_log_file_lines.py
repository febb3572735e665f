"""What a log that is not a terminal reads: the loop's lines, each on its own line.

On a stream that is not a tty (a log file, a pipe) each line the loop prints
ends the state of a `ProgressBar` first (``disable=None``: no bar there at
all).  The time shares of `Profiler(breakdown=True)`
make one compact ``time share`` entry of the epoch line.
"""

import io

import tfsnippet as spt


class Terminal(io.StringIO):
    def isatty(self):
        return True


def train(style, out, clock, component, max_epoch=2):
    """Train 3 steps an epoch (1 s each, a variable updated in `style`), printing
    into `out` (as a log file would receive them) and each epoch's line."""
    var = style.variable(0., 'v')
    update = style.updater(var, 1.)
    loop = spt.TrainLoop(max_epoch=max_epoch, clock=clock, show_eta=False,
                         print_func=lambda line: out.write(line + '\n'))
    loop.add_component(component)
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps([1, 2, 3]):
                clock.advance(1)
                update()
                loop.collect_metrics(loss=1.)
            loop.print_logs()
    assert style.value(var) == 3. * max_epoch
    return out.getvalue()


EPOCH_LINES = ['[Epoch 1/2, Step 3] epoch time: 3s; step time: 1s (±0s); loss: 1 (±0)',
               '[Epoch 2/2, Step 6] epoch time: 3s; step time: 1s (±0s); loss: 1 (±0)']


def test_a_progress_bar_in_a_log_file_never_shares_a_line_with_the_loop(style, fake_clock):
    log = io.StringIO()     # the bar and the loop's lines go to the same file
    text = train(style, log, fake_clock, spt.ProgressBar(file=log, mininterval=0))
    lines = text.split('\n')
    assert [line for line in lines if '[Epoch' in line] == EPOCH_LINES   # each alone
    assert any('Epoch 1/2: ' in line and '3/3' in line for line in lines)   # and the bar


def test_a_progress_bar_told_to_can_write_nothing_into_a_log_file(style, fake_clock):
    log = io.StringIO()
    text = train(style, log, fake_clock,
                 spt.ProgressBar(file=log, mininterval=0, disable=None))
    assert text.split('\n') == EPOCH_LINES + ['']


def test_a_progress_bar_on_a_terminal_is_drawn(style, fake_clock):
    terminal = Terminal()
    train(style, io.StringIO(), fake_clock, spt.ProgressBar(file=terminal, mininterval=0))
    assert 'Epoch 2/2: ' in terminal.getvalue()


def test_the_time_breakdown_is_one_entry_of_the_epoch_line(style, fake_clock):
    text = train(style, io.StringIO(), fake_clock, spt.Profiler(breakdown=True), max_epoch=1)
    assert text == ('[Step 3] epoch time: 3s; step time: 1s (±0s); loss: 1 (±0); '
                    'time share: data 0%, step 100%, outside 0%, checkpoint 0%, '
                    'summaries 0%, loop 0%\n')
