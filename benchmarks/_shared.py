"""Set-up shared by the benchmark scripts, and the one-process runner of their quick modes.

Scripts in this directory import it as ``_shared`` (next to ``_bench``).  The pieces:

* :func:`quick_parser`: the options every script has, ``--quick`` (smoke
  sizes, one round: a check that the script runs, not figures) and
  ``--table-json``, and ``--dir`` for those that write files;
* :func:`scratch_dir`: the temporary folder a script writes its files into
  (under ``--dir`` when given), removed at the end;
* :func:`matrices`: float32 parameters as five 2000-wide matrices, eager
  ``tf.Variable`` or graph-mode ``get_variable``;
* :class:`BenchConfig` and :func:`lean_experiment`: the config and the
  ``Experiment`` without tee or hparams that the recording and search
  benchmarks run their trials in;
* :func:`run_child`: run this script (or another) in a child, in eager or in
  graph mode, and return what it printed;
* :func:`run_quick` and :func:`shared_children`: run several scripts'
  quick modes in this one process (TensorFlow is imported once), their graph
  children in one graph-mode worker process instead of one child each.

Outside :func:`shared_children` a child is a fresh process, as a full run
wants (each style's figures from its own process).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Sequence
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))

__all__ = ['quick_parser', 'scratch_dir', 'matrices', 'BenchConfig', 'lean_experiment',
           'run_child', 'shared_children', 'run_script', 'run_quick']


# ------------------------------------------------------------------ options, files
def quick_parser(description: str, quick_help: str, *, dir: bool = False
                 ) -> argparse.ArgumentParser:
    """A parser with ``--quick``, ``--table-json`` and, with `dir`, ``--dir``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument('--quick', action='store_true',
                        help=f'{quick_help} (smoke sizes, one round: not figures)')
    if dir:
        parser.add_argument('--dir', help='where to write the files (default: a temp dir)')
    parser.add_argument('--table-json', metavar='PATH', help='also write the rows as JSON')
    return parser


@contextlib.contextmanager
def scratch_dir(parent: str | None = None) -> Iterator[str]:
    """A temporary folder (under `parent` when given), removed at the end."""
    with tempfile.TemporaryDirectory(dir=parent) as root:
        yield root


# ------------------------------------------------------------------ models
def matrices(n_params: int, graph: bool = False) -> list[Any]:
    """Five ``[n_params // 10000, 2000]`` float32 variables (seeded normal values)."""
    import tensorflow as tf

    rows = n_params // (5 * 2000)
    if graph:
        v1 = tf.compat.v1
        return [v1.get_variable(f'w{i}', initializer=v1.random_normal([rows, 2000], seed=i))
                for i in range(5)]
    return [tf.Variable(tf.random.normal([rows, 2000], seed=i), name=f'w{i}')
            for i in range(5)]


def _config_class() -> type:
    import tfsnippet as spt

    class BenchConfig(spt.Config):
        """The config of a benchmark's run or trial."""
        lr = 0.001
        batch_size = 64

    return BenchConfig


def __getattr__(name: str) -> Any:   # BenchConfig: tfsnippet imported when first asked
    if name == 'BenchConfig':
        cls = _config_class()
        globals()['BenchConfig'] = cls
        return cls
    raise AttributeError(name)


def lean_experiment(root: str, name: str, args: Sequence[str] = (), **kwargs: Any) -> Any:
    """An ``Experiment`` of :class:`BenchConfig` in `root`, without tee nor hparams."""
    import tfsnippet as spt

    return spt.Experiment(__getattr__('BenchConfig'), root, name=name, args=list(args),
                          tee=False, hparams=False, **kwargs)


# ------------------------------------------------------------------ children
class _Shared:
    """Children run here (eager) or in one graph-mode worker process (graph)."""

    def __init__(self) -> None:
        self.worker: subprocess.Popen | None = None

    def run(self, script: str, argv: Sequence[str], graph: bool, env: dict[str, str]
            ) -> tuple[int, str, str]:
        if not graph:
            return run_script(script, argv, env)
        if self.worker is None:
            self.worker = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), '--graph-worker'],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                    p for p in (os.path.dirname(HERE), os.environ.get('PYTHONPATH')) if p)))
        assert self.worker.stdin is not None and self.worker.stdout is not None
        self.worker.stdin.write(json.dumps({'script': script, 'argv': list(argv),
                                            'env': env}) + '\n')
        self.worker.stdin.flush()
        line = self.worker.stdout.readline()
        if not line:
            raise RuntimeError(f'the graph-mode worker died (exit code {self.worker.wait()})')
        reply = json.loads(line)
        return reply['rc'], reply['stdout'], reply['stderr']

    def close(self) -> None:
        if self.worker is not None:
            assert self.worker.stdin is not None
            self.worker.stdin.close()       # its loop ends: it exits
            try:
                self.worker.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.worker.kill()
                self.worker.wait()


_SHARED: list[_Shared] = []


@contextlib.contextmanager
def shared_children() -> Iterator[None]:
    """Within: :func:`run_child` runs eager children in this process, graph ones in one
    graph-mode worker process shared by all."""
    shared = _Shared()
    _SHARED.append(shared)
    try:
        yield
    finally:
        _SHARED.remove(shared)
        shared.close()


def run_child(script: str, argv: Sequence[str], *, graph: bool,
              env: dict[str, str] | None = None, timeout: float = 1800) -> str:
    """Run `script` with `argv` in a child in eager or graph mode; return its stdout.

    The child must itself switch to graph mode when asked (by its arguments or
    `env`); a shared graph worker has done so already.  Raises
    ``RuntimeError`` with the end of its stderr when it fails."""
    env = dict(env or {})
    if _SHARED:
        rc, out, err = _SHARED[-1].run(os.path.abspath(script), argv, graph, env)
    else:
        proc = subprocess.run([sys.executable, os.path.abspath(script), *argv],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=timeout, env=dict(os.environ, **env))
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    if rc != 0:
        raise RuntimeError(f'the {"graph" if graph else "eager"} child '
                           f'{os.path.basename(script)} {" ".join(argv)} failed (exit code '
                           f'{rc}):\n{err[-3000:]}')
    return out


def run_script(script: str, argv: Sequence[str], env: dict[str, str] | None = None,
               tmp: str | None = None) -> tuple[int, str, str]:
    """Run `script`'s ``main()`` in this process with `argv`: ``(exit code, stdout,
    stderr)``.  The module is loaded afresh under its own name; `tmp`, when given, is
    its temporary folder (``tempfile.gettempdir()``) meanwhile."""
    name = os.path.splitext(os.path.basename(script))[0]
    saved_argv, saved_env, saved_tmp = sys.argv, dict(os.environ), tempfile.tempdir
    out, err = io.StringIO(), io.StringIO()
    sys.argv = [script, *argv]
    os.environ.update(env or {})
    if tmp is not None:
        tempfile.tempdir = tmp
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                spec = importlib.util.spec_from_file_location(name, script)
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                spec.loader.exec_module(module)
                rc = module.main()
            except SystemExit as e:
                rc = e.code
            except BaseException:   # noqa: B902 - the script's failure, reported
                traceback.print_exc()
                rc = 1
    finally:
        sys.argv, tempfile.tempdir = saved_argv, saved_tmp
        os.environ.clear()
        os.environ.update(saved_env)
    rc = 0 if rc is None else rc if isinstance(rc, int) else 1
    return rc, out.getvalue(), err.getvalue()


def _graph_worker() -> int:
    """Read ``{script, argv, env}`` lines, run each in a fresh graph; answer one JSON line."""
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    replies = os.fdopen(os.dup(1), 'w')
    os.dup2(2, 1)          # stray writes to fd 1 must not mix with the replies
    for line in sys.stdin:
        request = json.loads(line)
        with tf.Graph().as_default():
            rc, out, err = run_script(request['script'], request['argv'], request['env'])
        replies.write(json.dumps({'rc': rc, 'stdout': out, 'stderr': err}) + '\n')
        replies.flush()
    return 0


#: Scripts that set TensorFlow's devices up before its runtime starts (two logical
#: CPUs, op determinism): :func:`run_quick` runs them in a process of their own, in
#: parallel with the others.
OWN_PROCESS = frozenset({'bench_distributed.py'})


def run_quick(scripts: Sequence[str], out_dir: str) -> list[str]:
    """Run each script's ``--quick`` mode in this process, children shared (those of
    `OWN_PROCESS` in a child each, started first and running meanwhile); return the
    scripts that failed.  ``OUT/<script>.json`` gets its rows, ``.out`` and ``.err`` its
    output, ``.rc`` its exit code, ``.secs`` the seconds it took (wall; those of
    `OWN_PROCESS` from the start to their end), and the folder ``OUT/<script>.tmp`` was
    its temporary folder (left empty by a script that cleans up)."""
    def base(script: str) -> str:
        return os.path.join(out_dir, script)

    def argv(script: str) -> list[str]:
        os.makedirs(base(script) + '.tmp')
        return ['--quick', '--table-json', base(script) + '.json']

    results: dict[str, tuple[int, str, str]] = {}
    seconds: dict[str, float] = {}
    own = {}
    start = time.perf_counter()
    for script in scripts:
        if script in OWN_PROCESS:    # output straight into its files: never a full pipe
            with open(base(script) + '.out', 'w') as out, open(base(script) + '.err', 'w') as err:
                own[script] = subprocess.Popen(
                    [sys.executable, os.path.join(HERE, script), *argv(script)], stdout=out,
                    stderr=err, env=dict(os.environ, TMPDIR=base(script) + '.tmp'))
    with shared_children():
        for script in scripts:
            if script not in own:
                began = time.perf_counter()
                results[script] = run_script(os.path.join(HERE, script), argv(script),
                                             tmp=base(script) + '.tmp')
                seconds[script] = time.perf_counter() - began
    for script, proc in own.items():
        proc.wait()
        seconds[script] = time.perf_counter() - start
        with open(base(script) + '.out', encoding='utf-8') as out, \
                open(base(script) + '.err', encoding='utf-8') as err:
            results[script] = proc.returncode, out.read(), err.read()
    failed = []
    for script in scripts:
        rc, out, err = results[script]
        for ext, text in (('.out', out), ('.err', err), ('.rc', str(rc)),
                          ('.secs', f'{seconds[script]:.1f}')):
            with open(base(script) + ext, 'w', encoding='utf-8') as f:
                f.write(text)
        if rc != 0 or not os.path.exists(base(script) + '.json'):
            failed.append(script)
    return failed


if __name__ == '__main__':
    if sys.argv[1:] == ['--graph-worker']:
        sys.exit(_graph_worker())
    sys.exit(f'usage: {sys.argv[0]} --graph-worker (run by run_child, not by hand)')
