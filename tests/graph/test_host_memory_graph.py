"""Host memory (issue 24) with ``tf.compat.v1`` variables: large variables are
copied into host buffers by pieces through a session and assigned back.

The rest runs in both styles in tests/scaffold/test_host_memory.py.
"""

import numpy as np
import tensorflow as tf

from tfsnippet.scaffold.checkpoint.io import CHUNK_BYTES, HostBuffers

v1 = tf.compat.v1

BIG = CHUNK_BYTES // 4 * 3 // 2 + 3


def test_copy_by_pieces_and_assign(session):
    w = v1.get_variable('w', shape=[BIG], initializer=v1.zeros_initializer())
    m = v1.get_variable('m', shape=[3, 2], initializer=v1.ones_initializer())
    fill = v1.assign(w, tf.range(BIG, dtype=tf.float32))
    buffers = HostBuffers()
    buffers.prepare([w, m])
    session.run(v1.global_variables_initializer())
    session.run(fill)
    copied = buffers.copy([w, m], session)
    np.testing.assert_array_equal(copied[0], np.arange(BIG, dtype=np.float32))
    np.testing.assert_array_equal(copied[1], np.ones([3, 2]))
    copied[0][:] = 5.
    HostBuffers.assign([w, m], copied, session)
    assert np.all(session.run(w) == 5.)
    assert buffers.copy([w, m], session)[0] is copied[0]
