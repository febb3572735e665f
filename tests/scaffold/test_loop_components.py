"""The loop's plug-ins after the core redesign, eager mode: one metric book for
every reader, monitors with `min_delta`/`baseline`/`cooldown`, NaN validations,
component state keys, and the rule that the loop core imports no feature.

The tests taking ``style`` run in both TF styles (a `Counter` ``w`` gains 1
per step); the rest in eager mode.
"""

import ast
import re
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet import EventKeys
from tfsnippet.utils import Every
from tests.helpers import read_scalars
from tests.helpers.loops import Counter

PACKAGE = Path(spt.__file__).parent


def epochs(loop, valid, steps=1, body=None):
    """Run `loop`: `steps` steps an epoch, then collect ``valid_loss = valid[epoch - 1]``."""
    with loop:
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps(range(steps)):
                if body is not None:
                    body(loop)
            loop.collect_metrics(valid_loss=valid[epoch - 1])
            loop.print_logs()


# ------------------------------------------------------------ one metric book
def test_a_variable_metric_prints_and_writes_the_same_values(tmp_path, fake_clock):
    """Regression: an eager variable collected as a metric (values 1, 2, 3, 4)
    printed a mean of 2.5 while TensorBoard recorded 4.0 at every step."""
    v = tf.Variable(0.)
    lines = []
    loop = spt.TrainLoop(max_epoch=1, summary_dir=str(tmp_path), print_func=lines.append,
                         clock=fake_clock, show_eta=False)
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(4)):
                v.assign_add(1.)
                loop.collect_metrics(v=v)
            loop.print_logs()
    assert lines[0].endswith('v: 2.5 (±1.11803)')
    assert read_scalars(tmp_path)['metrics/v'] == [(1, 1.), (2, 2.), (3, 3.), (4, 4.)]


def test_metrics_collected_handlers_see_the_values_as_stored():
    v = tf.Variable(3.)
    seen = []
    loop = spt.TrainLoop(max_epoch=1, print_func=lambda s: None)
    loop.events.on(EventKeys.METRICS_COLLECTED, lambda lp, m: seen.append(m))
    with loop:
        for _ in loop.iter_epochs():
            loop.collect_metrics(v=v, xs=[1, 2])
            v.assign(5.)
    assert float(seen[0]['v']) == 3.                  # read when collected
    assert seen[0]['xs'].dtype == np.float64          # lists became float64 arrays


def test_watch_metric_with_every_reads_only_due_values(fake_clock):
    loop = spt.TrainLoop(max_epoch=1, print_func=lambda s: None, clock=fake_clock)
    seen = []
    with loop:
        loop.watch_metric('loss', seen.append, every=Every(steps=3))
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(7)):
                loop.collect_metrics(loss=tf.constant(float(step)))
    assert seen == [3., 6.]


def test_loss_guard_every_steps_reads_the_loss_on_schedule_only():
    loop = spt.TrainLoop(max_epoch=1, print_func=lambda s: None)
    loop.add_component(spt.LossGuard('loss', action='stop', every=Every(steps=4)))
    with loop:
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(10)):
                # NaN at step 2 is never read; the one at step 8 is
                loop.collect_metrics(loss=float('nan') if step in (2, 8) else 1.)
    assert loop.stop_reason == '`loss` is nan at epoch 1, step 8'


# ------------------------------------------------------------ NaN validations
def test_a_nan_first_validation_is_not_a_best_and_restores_nothing(style):
    w = Counter(style)
    lines = []
    loop = spt.TrainLoop([w.var], max_epoch=2, early_stopping=True, print_func=lines.append,
                         show_eta=False)
    with pytest.warns(UserWarning, match='Early-stopping has never been triggered'):
        epochs(loop, [float('nan'), float('nan')], body=w.step)
    assert loop.best_valid_metric is None
    assert float(w.value()) == 2.                      # nothing was restored
    assert not any(line.endswith('(*)') for line in lines)
    assert not any('Restore early-stopping' in line for line in lines)


def test_nan_after_a_best_keeps_the_best():
    w = tf.Variable(0.)
    lines = []
    loop = spt.TrainLoop([w], max_epoch=3, early_stopping=True, print_func=lines.append,
                         show_eta=False)
    epochs(loop, [2., float('nan'), 3.], body=lambda lp: w.assign_add(1.))
    assert loop.best_valid_metric == 2.
    assert float(w.numpy()) == 1.
    assert lines[-1] == 'Restore early-stopping parameters: from step 1, where valid_loss = 2'


# ------------------------------------------------------------ min_delta / baseline / cooldown
def test_early_stopping_min_delta_and_patience(style):
    w = Counter(style)
    loop = spt.TrainLoop([w.var], max_epoch=10, print_func=lambda s: None, show_eta=False)
    loop.add_component(spt.EarlyStopping([w.var], patience=2, min_delta=.1))
    # 0.95 and 0.92 are within min_delta of 1.0: two values without improvement stop
    epochs(loop, [1., .95, .92, .5, .4], body=w.step)
    assert loop.epoch == 3
    assert loop.stop_reason == '`valid_loss` has not improved for 2 validations (patience 2)'
    assert float(w.value()) == 1.


def test_early_stopping_baseline_must_be_beaten(style):
    w = Counter(style)
    validate = style.computed(tf.identity)
    loop = spt.TrainLoop([w.var], max_epoch=4, print_func=lambda s: None, show_eta=False,
                         valid_metric_name='valid_acc')
    es = spt.EarlyStopping([w.var], baseline=.9)
    loop.add_component(es)
    with loop:
        for epoch in loop.iter_epochs():
            w.step()
            loop.collect_metrics(valid_acc=validate([.5, .95, .93, .97][epoch - 1]))
    assert es.monitor.mode == 'max' and es.monitor.best == pytest.approx(.97)
    assert float(w.value()) == 4.


def test_early_stopping_watches_its_own_metric():
    w = tf.Variable(0.)
    loop = spt.TrainLoop([w], max_epoch=3, print_func=lambda s: None, show_eta=False)
    es = spt.EarlyStopping([w], metric='valid_acc')
    loop.add_component(es)
    with loop:
        for epoch in loop.iter_epochs():
            w.assign_add(1.)
            loop.collect_metrics(valid_loss=float(epoch), valid_acc=[.5, .9, .7][epoch - 1])
    assert loop.best_valid_metric == 1.           # the loop's own metric, smaller is better
    assert float(w.numpy()) == 2.                 # the best valid_acc was at epoch 2


def test_reduce_on_plateau_cooldown_and_min_lr(style, fake_clock):
    lr = style.variable(1., 'lr')
    lines = []
    loop = spt.TrainLoop(max_epoch=8, print_func=lines.append, clock=fake_clock,
                         show_eta=False)
    loop.add_component(spt.ReduceOnPlateau(lr, factor=.5, patience=1, cooldown=2, min_lr=.2))
    values = []

    def record(lp):
        values.append(float(style.value(lr)))
    epochs(loop, [1.] * 8, body=record)
    # reduced after epochs 2, 5 and 8 (each reduction is followed by 2 epochs of cooldown)
    assert values == [1., 1., .5, .5, .5, .25, .25, .25]
    assert style.value(lr) == np.float32(.2)
    reductions = [line for line in lines if line.startswith('[Epoch') and 'Reduce' in line]
    assert [r.split(']')[0] for r in reductions] == ['[Epoch 2/8, Step 2', '[Epoch 5/8, Step 5',
                                                     '[Epoch 8/8, Step 8']


# ------------------------------------------------------------ component state keys
def make_plateaus(a, b, **kwargs):
    return [spt.ReduceOnPlateau(a, factor=.5, patience=2, **kwargs),
            spt.ReduceOnPlateau(b, factor=.5, patience=3, **kwargs)]


def test_two_reduce_on_plateaus_resume_with_their_own_state(style, tmp_path):
    a, b = style.variable(1., 'lr_a'), style.variable(1., 'lr_b')
    loop = spt.TrainLoop(max_epoch=2, checkpoint_dir=str(tmp_path), checkpoint_epoch_freq=1,
                         checkpoint_save_objects={'a': a, 'b': b}, print_func=lambda s: None)
    first = make_plateaus(a, b, metric='loss_a')
    first[1] = spt.ReduceOnPlateau(b, factor=.5, patience=3, metric='loss_b')
    for c in first:
        loop.add_component(c)
    with loop:
        for epoch in loop.iter_epochs():
            # loss_a improves at epoch 2, loss_b does not: their wait counts differ
            loop.collect_metrics(loss_a=[1., .5][epoch - 1], loss_b=1.)
    assert [c.state_dict()['monitor']['wait'] for c in first] == [0, 1]

    loop2 = spt.TrainLoop(max_epoch=3, checkpoint_dir=str(tmp_path), checkpoint_epoch_freq=1,
                          checkpoint_save_objects={'a': a, 'b': b}, print_func=lambda s: None)
    second = [spt.ReduceOnPlateau(a, factor=.5, patience=2, metric='loss_a'),
              spt.ReduceOnPlateau(b, factor=.5, patience=3, metric='loss_b')]
    for c in second:
        loop2.add_component(c)
    with loop2:
        assert [c.state_dict()['monitor']['wait'] for c in second] == [0, 1]
        assert [c.state_dict()['monitor']['best'] for c in second] == [.5, 1.]


def test_every_steps_handler_with_the_steps_of_the_style(style, fake_clock):
    w = Counter(style)
    seen = []
    loop = spt.TrainLoop(max_epoch=2, print_func=lambda s: None, clock=fake_clock)
    loop.events.on(EventKeys.AFTER_STEP, lambda lp: seen.append(float(w.value())),
                   every=Every(steps=3))
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(4)):
                w.step()
    assert seen == [3., 6.]


def test_two_components_with_one_state_key_are_refused():
    lr = tf.Variable(1., name='lr')
    loop = spt.TrainLoop(max_epoch=1, print_func=lambda s: None)
    loop.add_component(spt.ReduceOnPlateau(lr))
    second = spt.ReduceOnPlateau(lr, factor=.1)
    with pytest.raises(ValueError, match=re.escape(
            "Two components have the state key 'reduce_on_plateau[valid:lr]'")) as e:
        loop.add_component(second)
    assert 'pass `name=` to one of them' in str(e.value)
    loop.add_component(spt.ReduceOnPlateau(lr, factor=.1, name='fine'))   # named apart


def test_the_same_component_cannot_be_added_twice():
    loop = spt.TrainLoop(max_epoch=1, print_func=lambda s: None)
    bar = spt.ProgressBar(disable=True)
    loop.add_component(bar)
    with pytest.raises(ValueError, match='has been added already'):
        loop.add_component(bar)


def test_bad_monitor_mode_names_the_argument():
    w = tf.Variable(0.)
    with pytest.raises(ValueError, match=re.escape(
            "`mode` must be 'min', 'max' or 'auto', got 'lowest'")):
        spt.EarlyStopping([w], mode='lowest')
    with pytest.raises(ValueError, match=re.escape(
            "`mode` must be 'min', 'max' or 'auto', got 'up'")):
        spt.ReduceOnPlateau(w, mode='up')


def test_components_unsubscribe_when_the_loop_is_left(tmp_path):
    loop = spt.TrainLoop(max_epoch=1, summary_dir=str(tmp_path), checkpoint_dir=str(tmp_path),
                         checkpoint_step_freq=1, print_func=lambda s: None)
    loop.add_component(spt.ProgressBar(disable=True))
    keys = [EventKeys.AFTER_STEP, EventKeys.METRICS_COLLECTED, EventKeys.BEFORE_EPOCH,
            EventKeys.AFTER_EPOCH]
    with loop:
        assert all(loop.events.has_handlers(k) for k in keys)
    assert not any(loop.events.has_handlers(k) for k in keys)


# ------------------------------------------------------------ layout rules
def _top_level_imports(tree):
    """The import statements that run when the module is imported: at module level
    (also inside ``if``/``try``), but not under ``if TYPE_CHECKING:`` and not inside
    functions (the factory methods' deferred imports run at call time)."""
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not (isinstance(node.test, ast.Name) and node.test.id == 'TYPE_CHECKING'):
                pending.extend(node.body)
            pending.extend(node.orelse)
        elif isinstance(node, ast.Try):
            pending.extend(node.body + node.orelse + node.finalbody)
            for handler in node.handlers:
                pending.extend(handler.body)


def _imports(path):
    """The modules of the package that `path` imports when it is imported (resolved,
    not the package inits that Python runs on the way)."""
    tree = ast.parse(path.read_text())
    module = '.'.join(path.relative_to(PACKAGE.parent).with_suffix('').parts)
    package = module if path.name == '__init__.py' else module.rsplit('.', 1)[0]
    if path.name == '__init__.py':
        module = package
    found = set()
    for node in _top_level_imports(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split('.')
                base = base[:len(base) - node.level + 1]
                target = '.'.join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ''
            for alias in node.names:
                candidate = f'{target}.{alias.name}'
                found.add(candidate if _module_path(candidate) else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return module, {m for m in found if m.startswith('tfsnippet') and _module_path(m)}


def _module_path(name):
    path = PACKAGE.parent.joinpath(*name.split('.'))
    return path.with_suffix('.py').is_file() or (path / '__init__.py').is_file()


def _graph():
    graph = {}
    for path in PACKAGE.rglob('*.py'):
        module, deps = _imports(path)
        graph[module] = deps - {module}
    return graph


def test_no_module_imports_a_module_that_imports_it_back():
    graph = _graph()
    cycles = []

    def visit(node, stack, on_stack, done):
        on_stack.add(node)
        stack.append(node)
        for dep in graph.get(node, ()):
            if dep in on_stack:
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in done:
                visit(dep, stack, on_stack, done)
        stack.pop()
        on_stack.discard(node)
        done.add(node)

    done = set()
    for node in sorted(graph):
        if node not in done:
            visit(node, [], set(), done)
    assert cycles == []


def test_the_loop_core_imports_no_feature_module():
    _, deps = _imports(PACKAGE / 'scaffold' / 'loop' / 'core.py')
    features = {d for d in deps if d.startswith('tfsnippet.scaffold.components.') and
                not d.endswith('.base')}
    assert features == set()
    assert len((PACKAGE / 'scaffold' / 'loop' / 'core.py').read_text().splitlines()) <= 400


class _Exits(spt.LoopComponent):
    """Records its exit into `log`; raises `raises` from it."""

    def __init__(self, name, log, raises=None):
        self.name, self.log, self.raises = name, log, raises

    @property
    def state_key(self):
        return self.name

    def on_exit(self, loop, error):
        self.log.append((self.name, type(error).__name__ if error else None))
        if self.raises is not None:
            raise self.raises


def test_every_component_exits_when_one_fails_and_the_loops_own_error_is_kept():
    log = []
    loop = spt.TrainLoop(max_epoch=1, print_func=lambda s: None)
    loop.add_component(_Exits('first', log))
    loop.add_component(_Exits('failing', log, OSError('disk full')))
    with pytest.raises(OSError, match='disk full'):   # the loop ended well: the failure shows
        with loop:
            pass
    assert log == [('failing', None), ('first', None)]

    log.clear()
    loop = spt.TrainLoop(max_epoch=1, print_func=lambda s: None)
    loop.add_component(_Exits('first', log))
    loop.add_component(_Exits('failing', log, OSError('disk full')))
    with pytest.warns(RuntimeWarning, match='_Exits failed to exit the loop: OSError: disk full'):
        with pytest.raises(ZeroDivisionError):   # not replaced by the component's error
            with loop:
                1 / 0
    assert log == [('failing', 'ZeroDivisionError'), ('first', 'ZeroDivisionError')]
