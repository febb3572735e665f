"""`` (*)`` marks an epoch's line when a new best validation value was reached
at any time in the epoch, not only when its last validation was one (with
validation every N steps the best often comes before the epoch's last one).
A step line keeps the classic rule: marked when the latest value was a new best."""

import tfsnippet as spt


def train(style, fake_clock, epochs):
    """Validate every 2 steps with the values of `epochs` (one list per epoch), print
    each epoch's line only; return the lines."""
    lines = []
    valid = style.computed(lambda x: x * 1.)      # each value computed by TensorFlow
    with spt.TrainLoop(max_epoch=len(epochs), print_func=lines.append, clock=fake_clock,
                       show_eta=False) as loop:
        for epoch in loop.iter_epochs():
            values = iter(epochs[epoch - 1])
            for step, _ in loop.iter_steps(range(4)):
                fake_clock.advance(1)
                if step % 2 == 0:
                    loop.collect_metrics(valid_loss=float(valid(next(values))))
            loop.print_logs()
    return lines


def test_an_epoch_that_reached_the_best_before_its_last_validation_is_marked(
        style, fake_clock):
    lines = train(style, fake_clock, [[0.5, 0.7], [0.4, 0.6], [0.45, 0.3], [0.8, 0.9]])
    assert lines == [
        '[Epoch 1/4, Step 4] epoch time: 4s; step time: 1s (±0s); valid loss: 0.6 (±0.1) (*)',
        '[Epoch 2/4, Step 8] epoch time: 4s; step time: 1s (±0s); valid loss: 0.5 (±0.1) (*)',
        '[Epoch 3/4, Step 12] epoch time: 4s; step time: 1s (±0s); valid loss: 0.375 (±0.075) '
        '(*)',
        '[Epoch 4/4, Step 16] epoch time: 4s; step time: 1s (±0s); valid loss: 0.85 (±0.05)']


def test_a_step_line_is_marked_only_when_its_latest_value_was_a_new_best(style, fake_clock):
    lines = []
    valid = style.computed(lambda x: x * 1.)
    with spt.TrainLoop(max_epoch=2, print_func=lines.append, clock=fake_clock,
                       show_eta=False) as loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps([0]):
                loop.collect_metrics(valid_loss=float(valid(0.5)))
                loop.collect_metrics(valid_loss=float(valid(0.9)))   # not better
                loop.print_logs()
            loop.print_logs()
    assert lines == [
        '[Epoch 1/2, Step 1] step time: 0s; valid loss: 0.7 (±0.2)',
        # the epoch reached its best, 0.5
        '[Epoch 1/2, Step 1] epoch time: 0s; step time: 0s; valid loss: 0.7 (±0.2) (*)',
        '[Epoch 2/2, Step 2] step time: 0s; valid loss: 0.7 (±0.2)',
        # 0.5 again is not better
        '[Epoch 2/2, Step 2] epoch time: 0s; step time: 0s; valid loss: 0.7 (±0.2)']
