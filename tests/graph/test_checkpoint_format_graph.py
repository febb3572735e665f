"""A checkpoint is data, never code: what is graph-only.

`CheckpointSaver.restore` of a legacy ``state.pkl`` (whose payload writes a
marker file) into graph variables only when trusted.  The rest runs in both
styles in tests/scaffold/test_checkpoint_format.py (the tests taking ``style``).
"""

import contextlib
import os
import re

import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.scaffold.checkpoint import UntrustedCheckpointError

from tests.helpers import Style
from ..scaffold.test_checkpoint_format import TRUST_ENV, legacy_run

v1 = tf.compat.v1


@contextlib.contextmanager
def new_graph():
    graph = tf.Graph()
    with graph.as_default(), v1.Session(graph=graph) as session:
        yield session


def test_saver_restore_reads_a_legacy_checkpoint_only_when_trusted(graph, session, tmp_path,
                                                                  monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    marker = legacy_run(tmp_path, Style('graph', graph, session))
    path = str(tmp_path / 'checkpoint' / 'checkpoint.dat-20')
    with new_graph() as session:
        w = v1.get_variable('w', shape=(), initializer=v1.constant_initializer(-1.))
        lr = v1.get_variable('lr', initializer=-1.)
        session.run(v1.global_variables_initializer())
        saver = spt.CheckpointSaver([w, lr], str(tmp_path / 'checkpoint'))
        with pytest.raises(UntrustedCheckpointError, match=re.escape('`trust_pickle=True`')):
            saver.restore(path)
        with pytest.raises(UntrustedCheckpointError):
            saver.restore_latest()
        assert not marker.exists()
        assert session.run([w, lr]) == [-1., -1.]
        objects = saver.restore(path, trust_pickle=True)
        assert marker.exists()
        saved = tf.train.load_checkpoint(os.path.join(path, 'variables'))
        assert session.run([w, lr]) == [saved.get_tensor('w'), saved.get_tensor('lr')]
        assert session.run(w) != -1.
        assert sorted(objects) == ['$$train_loop', 'recorder']
