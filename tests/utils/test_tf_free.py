"""The TensorFlow-free base layer: what imports no TensorFlow, and the classic names it keeps.

Each import is checked in a fresh interpreter, as a user's script would run it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tfsnippet as spt
from tfsnippet import tfops, utils
from tfsnippet.utils.status import PREEMPTED_EXIT_CODE, status_of_exit
from tfsnippet.utils.text import (close_matches, close_matches_hint, did_you_mean, short_repr,
                                  typed_repr)

ROOT = Path(spt.__file__).resolve().parents[1]

#: Classic names of tfsnippet.utils that come from tfsnippet.tfops.
TF_NAMES = ['create_session', 'ensure_variables_initialized', 'get_default_session_or_error',
            'get_uninitialized_variables', 'get_variables_as_dict', 'TensorWrapper',
            'register_tensor_wrapper_class', 'as_tf_variable', 'is_variable', 'variable_name',
            'variable_shape']


def run_python(code: str) -> str:
    env = {**os.environ, 'PYTHONPATH': str(ROOT), 'TF_CPP_MIN_LOG_LEVEL': '3'}
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          timeout=120, cwd=str(ROOT), env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.parametrize('module', ['tfsnippet', 'tfsnippet.utils', 'tfsnippet.experiment',
                                    'tfsnippet.experiment.config', 'tfsnippet.distributed',
                                    'tfsnippet.launch', 'tfsnippet.results'])
def test_import_loads_no_tensorflow(module):
    out = run_python(f'import sys, {module}\n'
                     'print(sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow"))')
    assert out == '[]'


def test_every_classic_name_is_reachable():
    for name in utils.__all__:
        namespace: dict = {}
        exec(f'from tfsnippet.utils import {name}', namespace)   # noqa: S102
        assert namespace[name] is getattr(spt.utils, name), name
        assert name in dir(utils), name
    assert spt.utils.create_session.__module__ == 'tfsnippet.tfops.session'
    assert spt.utils.TensorWrapper.__module__ == 'tfsnippet.tfops.tensor_wrapper'
    for name in TF_NAMES:
        assert name in utils.__all__
        assert getattr(utils, name) is getattr(tfops, name), name
    with pytest.raises(AttributeError, match="module 'tfsnippet.utils' has no attribute 'nope'"):
        getattr(utils, 'nope')


def test_every_public_name_of_the_package_is_reachable():
    names = spt.__all__
    assert {'TrainLoop', 'utils', 'Config', 'Experiment', 'DataFlow', 'settings'} <= set(names)
    assert set(names) <= set(dir(spt))
    for name in names:
        namespace: dict = {}
        exec(f'from tfsnippet import {name}', namespace)   # noqa: S102
        assert namespace[name] is getattr(spt, name), name
    assert spt.TrainLoop.__name__ == 'TrainLoop'


def test_config_package_keeps_its_public_names():
    from tfsnippet.experiment import config
    for name in ['Config', 'ConfigField', 'config_from_dict', 'config_to_dict',
                 'get_config_defaults', 'load_config_file', 'parse_config',
                 'register_config_arguments']:
        assert getattr(config, name) is getattr(spt, name)


@pytest.mark.parametrize('value, expected', [
    ('abc', "'abc'"),
    ('x' * 100, "'" + 'x' * 75 + "...'"),
    ([1], '[1]'),
    (None, 'None'),
])
def test_short_repr(value, expected):
    assert short_repr(value) == expected


def test_short_repr_describes_arrays_by_shape():
    np = pytest.importorskip('numpy')
    assert short_repr(np.zeros([1000, 10])) == 'ndarray(shape=(1000, 10), dtype=float64)'
    assert short_repr(np.float32(1.5)) == repr(np.float32(1.5))   # a scalar, not an array
    assert typed_repr(np.zeros([2])) == 'ndarray(shape=(2,), dtype=float64)'


@pytest.mark.parametrize('value, expected', [
    ('1', "'1' (str)"), (1, '1 (int)'), ([1], '[1] (list)'),
    ('y' * 100, "'" + 'y' * 75 + "...' (str)"),
])
def test_typed_repr(value, expected):
    assert typed_repr(value) == expected


def test_suggestions():
    assert close_matches('los', ['loss', 'acc', 'lost']) == ['lost', 'loss']
    assert close_matches('zzz', ['loss']) == []
    assert close_matches_hint('valid_los', ['valid_loss', 'train_acc']) == \
        '; close matches: valid_loss'
    assert close_matches_hint('zzz', ['loss']) == ''
    assert did_you_mean('--max_epochs', ['--max_epoch', '--lr']) == \
        ' (did you mean `--max_epoch`?)'
    assert did_you_mean('zzz', ['--lr']) == ''


@pytest.mark.parametrize('exc, status', [
    (None, 'completed'), (SystemExit(0), 'completed'), (SystemExit(None), 'completed'),
    (SystemExit(PREEMPTED_EXIT_CODE), 'preempted'), (SystemExit(1), 'failed'),
    (KeyboardInterrupt(), 'failed'), (ValueError('x'), 'failed'),
])
def test_status_of_exit(exc, status):
    assert status_of_exit(exc) == status


def test_preemption_exit_code_has_one_home():
    from tfsnippet.experiment.experiment import PREEMPTED_EXIT_CODE as experiment_code
    from tfsnippet.scaffold.components.checkpointer import (PREEMPTED_EXIT_CODE as loop_code,
                                                            TrainingPreempted)
    assert PREEMPTED_EXIT_CODE == 143 == experiment_code == loop_code
    assert status_of_exit(TrainingPreempted(loop_code)) == 'preempted'
