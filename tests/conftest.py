"""Test set-up shared by the whole suite.

Graph-mode tests are the tests in ``tests/graph/`` and the ``[graph]`` runs of
the tests that take the ``style`` fixture (one body for both TF styles, see
`tests.helpers.Style`).  ``tf.compat.v1.disable_eager_execution()`` is
process-global, so they cannot run in the eager process that runs the rest:
the main pytest process replaces each of them by a stand-in item, runs all
selected graph tests once in one child pytest process with eager execution
disabled, and reports each stand-in with its child's outcome (and failure
text).  ``TFSNIPPET_TEST_GRAPH_MODE=1 pytest tests/graph`` runs them directly
(name a file of ``style`` tests to run its ``[graph]`` runs directly)."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers import STYLES, FakeClock, Style

GRAPH_ENV = 'TFSNIPPET_TEST_GRAPH_MODE'
REPORT_ENV = 'TFSNIPPET_TEST_GRAPH_REPORT'
GRAPH_DIR = Path(__file__).parent / 'graph'
IN_GRAPH_PROCESS = os.environ.get(GRAPH_ENV) == '1'

if IN_GRAPH_PROCESS:
    import tensorflow as tf
    tf.compat.v1.disable_eager_execution()


def _is_graph_test(item) -> bool:
    """A test under tests/graph/, or the ``[graph]`` run of a test taking ``style``."""
    if GRAPH_DIR in Path(str(item.path)).parents:
        return True
    callspec = getattr(item, 'callspec', None)
    return callspec is not None and callspec.params.get('style') == 'graph'


# ----------------------------------------------------------- child process side
_child_results: dict = {}


def pytest_runtest_logreport(report):
    if not IN_GRAPH_PROCESS or not os.environ.get(REPORT_ENV):
        return
    entry = _child_results.setdefault(report.nodeid, {'outcome': 'passed', 'text': ''})
    if report.failed:
        entry['outcome'] = 'failed'
        entry['text'] += f'[{report.when}] {report.longreprtext}\n'
    elif report.skipped and entry['outcome'] == 'passed':
        entry['outcome'] = 'skipped'
        longrepr = report.longrepr
        entry['text'] = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)


# ------------------------------------------------------------ main process side
class GraphModeFailure(Exception):
    pass


class GraphModeItem(pytest.Item):
    """Stands for one graph-mode test; its outcome comes from the child process."""

    def runtest(self):
        results = _run_graph_process(self.session)
        entry = results.get(self.nodeid)
        if entry is None:
            raise GraphModeFailure(
                'the graph-mode child process reported no result for this test:\n'
                + results.get('__output__', {}).get('text', ''))
        if entry['outcome'] == 'skipped':
            pytest.skip(entry['text'])
        if entry['outcome'] == 'failed':
            raise GraphModeFailure(entry['text'])

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, GraphModeFailure):
            return f'(in the graph-mode child process)\n{excinfo.value}'
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, self.name


def _start_graph_process(session) -> None:
    """Start the child that runs every selected graph test, in the background: it
    works on the second core while this process runs the eager tests."""
    nodeids = [item.nodeid for item in session.items if isinstance(item, GraphModeItem)]
    tmp = tempfile.TemporaryDirectory()
    report = os.path.join(tmp.name, 'report.json')
    output = open(os.path.join(tmp.name, 'output.txt'), 'w+')  # noqa: SIM115 (closed on read)
    env = dict(os.environ, **{GRAPH_ENV: '1', REPORT_ENV: report})
    proc = subprocess.Popen(
        [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', *nodeids],
        cwd=str(session.config.rootpath), env=env, stdout=output, stderr=subprocess.STDOUT,
        text=True)
    session._tfsnippet_graph_process = (proc, tmp, report, output)


def _run_graph_process(session) -> dict:
    """The graph child's results by node id (waits, once, for it to end)."""
    cached = getattr(session, '_tfsnippet_graph_results', None)
    if cached is not None:
        return cached
    if getattr(session, '_tfsnippet_graph_process', None) is None:
        _start_graph_process(session)
    proc, tmp, report, output = session._tfsnippet_graph_process
    proc.wait()
    results = json.loads(Path(report).read_text()) if os.path.exists(report) else {}
    output.seek(0)
    results['__output__'] = {'text': output.read()[-8000:]}
    output.close()
    tmp.cleanup()
    session._tfsnippet_graph_process = None
    session._tfsnippet_graph_results = results
    return results


def pytest_collection_modifyitems(session, config, items):
    if IN_GRAPH_PROCESS:
        items[:] = [item for item in items if _is_graph_test(item)]
        return
    for i, item in enumerate(items):
        if _is_graph_test(item):
            items[i] = GraphModeItem.from_parent(item.parent, name=item.name)
    # the graph tests' outcomes come last: their child runs while the eager tests do
    items.sort(key=lambda item: isinstance(item, GraphModeItem))


def pytest_collection_finish(session):
    if IN_GRAPH_PROCESS or session.config.option.collectonly:
        return
    if any(isinstance(item, GraphModeItem) for item in session.items):
        _start_graph_process(session)


def pytest_sessionfinish(session):
    path = os.environ.get(REPORT_ENV)
    if IN_GRAPH_PROCESS and path:
        Path(path).write_text(json.dumps(_child_results))
        return
    running = getattr(session, '_tfsnippet_graph_process', None)
    if running is not None:        # the run stopped early (-x, Ctrl-C): stop the child too
        proc, tmp, _, output = running
        proc.kill()
        proc.wait()
        output.close()
        tmp.cleanup()


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope='session')
def s3_server():
    """A moto S3 server on 127.0.0.1 for the whole session (`tests.helpers.s3`);
    S3 clients of this process and its children are pointed at it."""
    from tests.helpers.s3 import MotoServer
    server = MotoServer().start()
    yield server
    server.stop()


@pytest.fixture(scope='session')
def fork_server():
    """One process that imported numpy, TensorFlow, Keras and ``sklearn.datasets``, for
    the whole session: kill, crash and example tests fork their scripts' runs from it
    (`tests.helpers.forkserver`), each a process of its own without an import of its own."""
    from tests.helpers.forkserver import ForkServer
    root = str(Path(__file__).resolve().parents[1])   # the runs import tfsnippet, tests.helpers
    path = os.pathsep.join(p for p in (root, os.environ.get('PYTHONPATH')) if p)
    forks = ForkServer(('numpy', 'tensorflow', 'keras', 'sklearn.datasets'),
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='',
                                PYTHONPATH=path))
    yield forks
    forks.close()


@pytest.fixture
def s3_bucket(s3_server):
    """The ``s3://`` URL of a fresh, empty bucket on the session's moto server."""
    return s3_server.new_bucket()


@pytest.fixture
def fake_clock():
    return FakeClock()


@pytest.fixture(params=STYLES)
def style(request):
    """Runs the test once per TF style: ``[eager]`` here, ``[graph]`` in the graph-mode
    child process (in a fresh ``tf.Graph`` with a default session); see `Style`."""
    if request.param == 'eager':
        yield Style('eager')
        return
    if not IN_GRAPH_PROCESS:
        raise RuntimeError('the [graph] style runs only in the graph-mode child process')
    graph = tf.Graph()
    with graph.as_default():
        session = tf.compat.v1.Session(graph=graph)
        with session.as_default():
            yield Style('graph', graph, session)
        session.close()
