"""The base install (no Optuna): the star import works, and a search says what to install."""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BLOCK = "import sys; sys.modules['optuna'] = None\n"   # `import optuna` fails, as uninstalled


def run(code):
    return subprocess.run([sys.executable, '-c', BLOCK + code], capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL,
                          env={**os.environ, 'PYTHONPATH': REPO, 'TF_CPP_MIN_LOG_LEVEL': '3'})


def test_star_import_works_and_search_raises_import_error_naming_the_install():
    done = run(
        'from tfsnippet import *\n'
        'import tfsnippet as spt\n'
        'assert Search is spt.Search and TrainLoop is spt.TrainLoop\n'
        'space = {"lr": spt.search.Float(1e-4, 1e-1, log=True)}\n'   # a space needs no Optuna
        'try:\n'
        '    spt.Search(spt.Config, space, metric="valid_loss")\n'
        'except ImportError as e:\n'
        '    print("ImportError:", e)\n')
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == (
        'ImportError: spt.Search runs on Optuna, which is not installed (import of optuna '
        'halted; None in sys.modules): pip install "tfsnippet[optuna]"')


def test_search_command_line_names_the_install():
    done = run("import runpy; sys.argv = ['tfsnippet.search', '--help']\n"
               "runpy.run_module('tfsnippet.search', run_name='__main__')\n")
    assert done.returncode == 1
    assert done.stderr.strip().endswith(
        'python -m tfsnippet.search: error: the search runs on Optuna, which is not installed '
        '(import of optuna halted; None in sys.modules): pip install "tfsnippet[optuna]"')
