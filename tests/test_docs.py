"""The documentation builds without warnings and its examples run.

``sphinx-build -W`` renders the guides and the API reference from the
docstrings; the doctest builder runs every ``>>>`` example of both, so that
documented behaviour cannot drift from the code.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip('sphinx', reason='the docs need Sphinx (`pip install ".[test]"`)')

DOCS_DIR = Path(__file__).resolve().parent.parent / 'docs'


@pytest.fixture(scope='module')
def doctrees(tmp_path_factory):
    """One environment for both builders: the doctest build (after the HTML one)
    reads no source again."""
    return tmp_path_factory.mktemp('doctrees')


@pytest.mark.parametrize('builder', ['html', 'doctest'])
def test_docs_build_without_warnings(builder, tmp_path, doctrees):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='')
    proc = subprocess.run(
        [sys.executable, '-m', 'sphinx', '-W', '--keep-going', '-b', builder, str(DOCS_DIR),
         str(tmp_path / builder), '-d', str(doctrees)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert proc.returncode == 0, proc.stdout[-6000:]
    if builder == 'doctest':
        assert ' 0 failures in tests' in proc.stdout, proc.stdout[-6000:]
