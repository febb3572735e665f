"""The small utils classic scripts import (API.md 13.5, 13.8, 13.10) and ``spt.settings``."""

import io
import os
import re
import tempfile
import threading
import warnings

import numpy as np
import pytest

from tfsnippet.settings_ import Settings, settings
from tfsnippet.utils.arrays import (minibatch_slices_iterator, split_numpy_array,
                                    split_numpy_arrays)
from tfsnippet.utils.console_table import ConsoleTable, print_as_table
from tfsnippet.utils.contexts import ContextStack, maybe_close
from tfsnippet.utils.deprecation import deprecated, deprecated_arg
from tfsnippet.utils.files import TemporaryDirectory, iter_files, makedirs
from tfsnippet.utils.naming import camel_to_underscore
from tfsnippet.utils.rng import generate_random_seed, make_random_state


def raises(exc_type, message):
    return pytest.raises(exc_type, match=re.escape(message))


# ------------------------------------------------------------ minibatch_slices_iterator
@pytest.mark.parametrize('length, batch_size, skip, expected', [
    (0, 3, False, []),
    (0, 3, True, []),
    (5, 2, False, [(0, 2), (2, 4), (4, 5)]),
    (5, 2, True, [(0, 2), (2, 4)]),
    (6, 2, False, [(0, 2), (2, 4), (4, 6)]),
    (6, 2, True, [(0, 2), (2, 4), (4, 6)]),
    (2, 5, False, [(0, 2)]),
    (2, 5, True, []),
    (np.int64(3), 3, False, [(0, 3)]),
])
def test_minibatch_slices(length, batch_size, skip, expected):
    slices = list(minibatch_slices_iterator(length, batch_size, skip_incomplete=skip))
    assert slices == [slice(a, b, 1) for a, b in expected]


def test_minibatch_slices_cover_the_data_once():
    data = np.arange(103)
    pieces = [data[s] for s in minibatch_slices_iterator(len(data), 10)]
    np.testing.assert_array_equal(np.concatenate(pieces), data)
    assert [len(p) for p in pieces] == [10] * 10 + [3]


@pytest.mark.parametrize('length, exc, message', [
    (-1, ValueError, '`length` must be a non-negative int, got -1'),
    (2.5, TypeError, '`length` must be a non-negative int, got 2.5'),
    (True, TypeError, '`length` must be a non-negative int, got True'),
])
def test_minibatch_slices_bad_length(length, exc, message):
    with raises(exc, message):
        minibatch_slices_iterator(length, 2)


def test_minibatch_slices_bad_batch_size():
    with raises(ValueError, '`batch_size` must be a positive int, got 0'):
        minibatch_slices_iterator(5, 0)


# ------------------------------------------------------------ split_numpy_arrays
def test_split_by_size_without_shuffle_cuts_off_the_end():
    x, y = np.arange(10), np.arange(10) * 2.
    (x1, y1), (x2, y2) = split_numpy_arrays([x, y], size=3, shuffle=False)
    np.testing.assert_array_equal(x1, np.arange(7))
    np.testing.assert_array_equal(y1, np.arange(7) * 2.)
    np.testing.assert_array_equal(x2, [7, 8, 9])
    np.testing.assert_array_equal(y2, [14., 16., 18.])


@pytest.mark.parametrize('portion, second', [
    (0., 0), (.1, 1), (.25, 3), (.5, 5), (.74, 7), (.75, 8), (1., 10)])
def test_split_by_portion_rounds_to_nearest_halves_up(portion, second):
    a, b = split_numpy_array(np.arange(10), portion=portion, shuffle=False)
    assert len(b) == second and len(a) == 10 - second
    np.testing.assert_array_equal(np.concatenate([a, b]), np.arange(10))


def test_split_with_shuffle_keeps_rows_together_and_is_reproducible():
    x = np.arange(20)
    y = x * 10
    (x1, y1), (x2, y2) = split_numpy_arrays([x, y], portion=.25, random_state=42)
    np.testing.assert_array_equal(y1, x1 * 10)
    np.testing.assert_array_equal(y2, x2 * 10)
    assert sorted(np.concatenate([x1, x2]).tolist()) == list(range(20))
    assert len(x2) == 5
    assert not np.array_equal(np.concatenate([x1, x2]), x)   # shuffled
    (x1b, _), (x2b, _) = split_numpy_arrays(
        [x, y], portion=.25, random_state=np.random.RandomState(42))
    np.testing.assert_array_equal(x1b, x1)
    np.testing.assert_array_equal(x2b, x2)


def test_split_numpy_array_takes_random_state():
    """Fixed: the classic one-array form drew a new seed whatever the caller wanted."""
    a1, b1 = split_numpy_array(np.arange(30), size=10, random_state=7)
    a2, b2 = split_numpy_array(np.arange(30), size=10, random_state=7)
    np.testing.assert_array_equal(b1, b2)
    np.testing.assert_array_equal(a1, a2)


def test_split_without_seed_follows_numpys_global_seed():
    np.random.seed(3)
    first = split_numpy_array(np.arange(50), size=5)[1]
    np.random.seed(3)
    again = split_numpy_array(np.arange(50), size=5)[1]
    np.testing.assert_array_equal(first, again)


def test_split_no_arrays():
    assert split_numpy_arrays([], size=1) == ((), ())


def test_split_accepts_lists():
    (a,), (b,) = split_numpy_arrays([[1, 2, 3]], size=1, shuffle=False)
    assert a.tolist() == [1, 2] and b.tolist() == [3]


@pytest.mark.parametrize('kwargs, exc, message', [
    ({}, ValueError, 'Pass exactly one of `portion` and `size`, got portion=None, size=None'),
    ({'portion': .5, 'size': 2}, ValueError,
     'Pass exactly one of `portion` and `size`, got portion=0.5, size=2'),
    ({'portion': 1.5}, ValueError, '`portion` must be a number in [0, 1], got 1.5'),
    ({'portion': -.1}, ValueError, '`portion` must be a number in [0, 1], got -0.1'),
    ({'portion': '0.5'}, TypeError, "`portion` must be a number in [0, 1], got '0.5'"),
    ({'size': 1.}, TypeError, '`size` must be an int, got 1.0'),
    ({'size': 1, 'random_state': 'seed'}, TypeError,
     "`random_state` must be None, an int seed, a numpy RandomState or Generator, got 'seed'"),
])
def test_split_bad_arguments(kwargs, exc, message):
    with raises(exc, message):
        split_numpy_arrays([np.arange(4)], **kwargs)


@pytest.mark.parametrize('size, first, second', [
    (11, [], list(range(10))),
    (10, [], list(range(10))),
    (-1, list(range(10)), []),
    (0, list(range(10)), []),
])
def test_split_clamps_a_size_out_of_range_as_the_classic_version(size, first, second):
    (a,), (b,) = split_numpy_arrays([np.arange(10)], size=size, shuffle=False)
    assert (a.tolist(), b.tolist()) == (first, second)
    a, b = split_numpy_array(np.arange(10), size=size, shuffle=True, random_state=1)
    assert (sorted(a.tolist()), sorted(b.tolist())) == (first, second)


def test_split_arrays_of_different_lengths():
    with raises(ValueError, '`arrays` must all have the same length, got lengths [3, 2]'):
        split_numpy_arrays([np.arange(3), np.arange(2)], size=1)


# ------------------------------------------------------------ random seeds
def test_generate_random_seed_is_a_python_int_in_range_and_follows_numpy_seed():
    np.random.seed(0)
    seeds = [generate_random_seed() for _ in range(100)]
    assert all(type(s) is int and 0 <= s < 0xffffffff for s in seeds)
    assert len(set(seeds)) == 100
    np.random.seed(0)
    assert [generate_random_seed() for _ in range(100)] == seeds


def test_make_random_state():
    rs = np.random.RandomState(1)
    gen = np.random.default_rng(1)
    assert make_random_state(rs) is rs
    assert make_random_state(gen) is gen
    assert make_random_state(5).randint(1000) == np.random.RandomState(5).randint(1000)
    assert isinstance(make_random_state(None), np.random.RandomState)
    with raises(TypeError, '`rng` must be None, an int seed, a numpy RandomState or '
                           'Generator, got True'):
        make_random_state(True, 'rng')


# ------------------------------------------------------------ files
def test_temporary_directory_and_makedirs_are_the_standard_ones(tmp_path):
    assert TemporaryDirectory is tempfile.TemporaryDirectory
    assert makedirs is os.makedirs
    with TemporaryDirectory() as d:
        makedirs(os.path.join(d, 'a', 'b'))
        assert os.path.isdir(os.path.join(d, 'a', 'b'))
    assert not os.path.exists(d)


def make_tree(root, names):
    for name in names:
        path = os.path.join(root, *name.split('/'))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(name)


def test_iter_files_lists_files_only_sorted_and_relative(tmp_path):
    make_tree(tmp_path, ['z.txt', 'a/2.txt', 'a/1.txt', 'a/b/deep.bin', 'm.txt'])
    os.makedirs(tmp_path / 'empty_dir')
    assert list(iter_files(tmp_path)) == ['a/1.txt', 'a/2.txt', 'a/b/deep.bin', 'm.txt', 'z.txt']
    assert list(iter_files(str(tmp_path), sep='\\')) == [
        'a\\1.txt', 'a\\2.txt', 'a\\b\\deep.bin', 'm.txt', 'z.txt']


def test_iter_files_of_an_empty_directory(tmp_path):
    assert list(iter_files(tmp_path)) == []


def test_iter_files_not_a_directory(tmp_path):
    missing = str(tmp_path / 'missing')
    with raises(ValueError, f'`root_dir` must be an existing directory, got {missing!r}'):
        iter_files(missing)


# ------------------------------------------------------------ maybe_close
class Closable:
    def __init__(self):
        self.closed = 0

    def close(self):
        self.closed += 1


def test_maybe_close_closes_on_exit_and_on_error():
    obj = Closable()
    with maybe_close(obj) as got:
        assert got is obj and obj.closed == 0
    assert obj.closed == 1
    obj2 = Closable()
    with pytest.raises(KeyError):
        with maybe_close(obj2):
            raise KeyError('boom')
    assert obj2.closed == 1


def test_maybe_close_passes_other_objects_through():
    items = [1, 2]
    with maybe_close(items) as got:
        assert got is items
    f = io.StringIO('x')
    with maybe_close(f):
        pass
    assert f.closed


# ------------------------------------------------------------ ContextStack
def test_context_stack_without_factory():
    stack = ContextStack()
    assert stack.top() is None and stack.items == []
    stack.push(1)
    stack.push(2)
    assert stack.top() == 2 and stack.items == [1, 2]
    assert stack.pop() == 2 and stack.pop() == 1
    with raises(RuntimeError, '`pop()` called on a ContextStack with nothing pushed'):
        stack.pop()


def test_context_stack_initial_item_is_made_once_per_thread_and_cannot_be_popped():
    made = []

    def factory():
        made.append(threading.current_thread().name)
        return object()

    stack = ContextStack(factory)
    bottom = stack.top()
    assert stack.top() is bottom and len(made) == 1
    stack.push('x')
    assert stack.items == [bottom, 'x']
    assert stack.pop() == 'x'
    with raises(RuntimeError, '`pop()` called on a ContextStack with nothing pushed'):
        stack.pop()
    assert stack.top() is bottom

    seen = {}

    def other():
        stack.push('y')
        seen['items'] = stack.items

    t = threading.Thread(target=other, name='other-thread')
    t.start()
    t.join()
    assert seen['items'][1] == 'y' and seen['items'][0] is not bottom
    assert made == ['MainThread', 'other-thread']
    assert stack.items == [bottom]          # the other thread's push is not seen here


def test_context_stack_factory_not_callable():
    with raises(TypeError, '`initial_factory` must be callable or None, got 3'):
        ContextStack(3)


# ------------------------------------------------------------ camel_to_underscore
@pytest.mark.parametrize('name, expected', [
    ('TrainLoop', 'train_loop'),
    ('trainLoop', 'train_loop'),
    ('HTTPServer', 'http_server'),
    ('getHTTPResponseCode', 'get_http_response_code'),
    ('Conv2D', 'conv2_d'),
    ('Dense_Layer', 'dense_layer'),
    ('_PrivateThing', '_private_thing'),
    ('already_snake', 'already_snake'),
    ('ABC', 'abc'),
    ('', ''),
])
def test_camel_to_underscore(name, expected):
    assert camel_to_underscore(name) == expected


def test_camel_to_underscore_not_a_str():
    with raises(TypeError, '`name` must be a str, got 3'):
        camel_to_underscore(3)


# ------------------------------------------------------------ deprecated
def caught_warnings(func, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        result = func(*args, **kwargs)
    return result, [(w.category, str(w.message), os.path.basename(w.filename)) for w in caught]


def test_deprecated_function_warns_on_every_call_from_the_callers_line():
    @deprecated('use `g` instead.', version='0.3')
    def f(x, y=1):
        """Add."""
        return x + y

    def call_twice():
        return [f(1), f(1, y=2)]

    result, seen = caught_warnings(call_twice)
    assert result == [2, 3]
    assert seen == [(DeprecationWarning, 'Function `f` is deprecated; use `g` instead.',
                     'test_classic_utils.py')] * 2
    assert f.__name__ == 'f'
    assert f.__doc__ == 'Add.\n\n.. deprecated:: 0.3\n   Deprecated; use `g` instead.\n'


def test_deprecated_without_message_or_parentheses():
    @deprecated
    def f():
        return 1

    @deprecated()
    def g():
        return 2

    assert caught_warnings(f)[1][0][1] == 'Function `f` is deprecated.'
    assert caught_warnings(g)[1][0][1] == 'Function `g` is deprecated.'
    assert f.__doc__ == '.. warning::\n   Deprecated.\n'


def test_deprecated_default_filter_shows_once_per_call_site():
    @deprecated('old.')
    def f():
        return 1

    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        warnings.simplefilter('default')
        for _ in range(3):
            f()            # one line: shown once
        f()                # another line: shown again
    assert len(caught) == 2


def test_deprecated_class_warns_at_instantiation():
    @deprecated('use `New` instead.')
    class Old:
        """An old class."""

        def __init__(self, value):
            self.value = value

    obj, seen = caught_warnings(Old, 5)
    assert obj.value == 5 and isinstance(obj, Old)
    assert seen == [(DeprecationWarning, 'Class `Old` is deprecated; use `New` instead.',
                     'test_classic_utils.py')]
    assert Old.__doc__ == 'An old class.\n\n.. warning::\n   Deprecated; use `New` instead.\n'


def test_deprecated_class_without_own_init():
    @deprecated()
    class Plain:
        pass

    obj, seen = caught_warnings(Plain)
    assert isinstance(obj, Plain)
    assert [m for _, m, _ in seen] == ['Class `Plain` is deprecated.']


def test_deprecated_bad_arguments():
    with raises(TypeError, '`message` must be a str, got 3'):
        deprecated(3)
    with raises(TypeError, '`version` must be a str or None, got 1.0'):
        deprecated('x', version=1.0)
    with raises(TypeError, '@deprecated applies to a class or a function, got 5'):
        deprecated('x')(5)


def test_deprecated_arg_warns_only_when_the_old_keyword_is_used():
    @deprecated_arg('lr', 'learning_rate', version='0.3')
    def fit(learning_rate=None, lr=None):
        return learning_rate if lr is None else lr

    assert caught_warnings(fit, learning_rate=.2) == (.2, [])
    assert caught_warnings(fit, .3) == (.3, [])
    value, seen = caught_warnings(fit, lr=.1)
    assert value == .1
    assert seen == [(DeprecationWarning,
                     'The argument `lr` of `fit` is deprecated; use `learning_rate` instead.',
                     'test_classic_utils.py')]


def test_deprecated_arg_without_replacement():
    @deprecated_arg('verbose')
    def run(verbose=False):
        return verbose

    assert caught_warnings(run, verbose=True)[1][0][1] == \
        'The argument `verbose` of `run` is deprecated.'


# ------------------------------------------------------------ ConsoleTable
def test_console_table_layout():
    t = ConsoleTable(3, col_space=2, col_align=['l', 'c', '>'])
    t.add_title('Results')
    t.add_hr('=')
    t.add_row(['name', 'x', 'value'])
    t.add_hr()
    t.add_row(['a', 'yes', 1])
    t.add_skip()
    t.add_row(['long_name', 'n', 123456])
    assert t.format().split('\n') == [
        'Results',
        '======================',        # 9 + 2 + 3 + 2 + 6 columns wide
        'name        x    value',
        '----------------------',
        'a          yes       1',
        '',
        'long_name   n   123456',
    ]
    assert str(t) == t.format()


def test_console_table_wide_title_expands_the_chosen_column():
    t = ConsoleTable(2, col_space=1, expand_col=0)
    t.add_title('A rather long title')
    t.add_hr('-')
    t.add_row(['k', 'v'])
    assert t.format().split('\n') == [
        'A rather long title', '-' * 19, 'k'.ljust(17) + ' v']


def test_console_table_title_with_a_right_hand_part():
    # the classic add_title(left, right): the right part flush with the table's right edge
    t = ConsoleTable(2, col_space=2)
    t.add_title('Left', 'Right')
    t.add_hr('-')
    t.add_row(['alpha', 1])
    t.add_row(['b', 12345])
    assert t.format().split('\n') == [
        'Left   Right',
        '-' * 12,                        # 5 + 2 + 5
        'alpha  1',
        'b      12345',
    ]
    narrow = ConsoleTable(2, col_space=3)
    narrow.add_title('Epoch 3', '12.5s')     # wider than the rows: column 0 absorbs it
    narrow.add_row(['loss', 0.25])
    assert narrow.format().split('\n') == ['Epoch 3 12.5s', 'loss     0.25']


def test_console_table_skips_do_not_stack():
    t = ConsoleTable(1)
    t.add_skip()                # nothing at the top
    t.add_row(['a'])
    t.add_skip()
    t.add_skip()                # one blank only
    t.add_row(['b'])
    t.add_hr('*')
    t.add_skip()                # none right after a rule
    t.add_row(['c'])
    assert t.format().split('\n') == ['a', '', 'b', '*', 'c']


def test_print_as_table():
    lines = []
    print_as_table('Config', [('max_epoch', 10), ('lr', 0.1)], print_func=lines.append)
    assert lines == ['Config\n===============\nmax_epoch   10\nlr          0.1']


def test_add_key_values_sorted():
    t = ConsoleTable(2)
    t.add_key_values({'b': 2, 'a': 1}, sort_keys=True)
    assert t.format() == 'a   1\nb   2'


@pytest.mark.parametrize('kwargs, exc, message', [
    ({'col_count': 0}, ValueError, '`col_count` must be a positive int, got 0'),
    ({'col_count': 2, 'col_space': 0}, ValueError, '`col_space` must be a positive int, got 0'),
    ({'col_count': 2, 'col_align': '<'}, ValueError,
     "`col_align` must hold one alignment per column (2), got '<'"),
    ({'col_count': 2, 'col_align': '<x'}, ValueError,
     "`col_align` entries must be one of '<', '^', '>', 'l', 'c', 'r', got 'x'"),
    ({'col_count': 2, 'expand_col': 2}, ValueError,
     '`expand_col` must be a column index in [0, 2), got 2'),
])
def test_console_table_bad_arguments(kwargs, exc, message):
    with raises(exc, message):
        ConsoleTable(**kwargs)


def test_console_table_bad_rows():
    t = ConsoleTable(3)
    with raises(ValueError, "`columns` must hold 3 cells, got 2: ['a', 'b']"):
        t.add_row(['a', 'b'])
    with raises(ValueError, "`c` must be one character, got '--'"):
        t.add_hr('--')
    with raises(TypeError, '`add_key_values()` needs a table of 2 columns, this one has 3'):
        t.add_key_values({'a': 1})


# ------------------------------------------------------------ settings
def test_settings_defaults():
    s = Settings()
    assert s.to_dict() == {'enable_assertions': True, 'check_numerics': False,
                           'auto_histogram': False}
    assert repr(s) == ('Settings(enable_assertions=True, check_numerics=False, '
                       'auto_histogram=False)')


def test_settings_scoped_restores_even_on_error():
    s = Settings()
    with pytest.raises(KeyError):
        with s.scoped(auto_histogram=True, check_numerics=True):
            assert s.auto_histogram and s.check_numerics
            raise KeyError()
    assert not s.auto_histogram and not s.check_numerics
    s.enable_assertions = False
    s.reset()
    assert s.enable_assertions


def test_the_package_settings_object():
    assert isinstance(settings, Settings)
    with settings.scoped(check_numerics=True):
        assert settings.check_numerics
    assert settings.check_numerics is False


def test_settings_bad_values():
    s = Settings()
    with raises(AttributeError, '`auto_histgram` is not a setting; the settings are: '
                                'enable_assertions, check_numerics, auto_histogram'):
        s.auto_histgram = True
    with raises(TypeError, '`settings.check_numerics` must be a bool, got 1'):
        s.check_numerics = 1
    with raises(TypeError, '`settings.auto_histogram` must be a bool, got None'):
        with s.scoped(auto_histogram=None):
            pass
    assert s.auto_histogram is False
