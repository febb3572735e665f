"""The two TF styles one test body runs in: eager code and TF1-style graph code.

A test that takes the ``style`` fixture (tests/conftest.py) runs once per style:
``test_x[eager]`` in the main pytest process and ``test_x[graph]`` in the
graph-mode child process, each with a `Style` whose helpers make variables,
run updates and compute values the way that style does.
"""

import contextlib

STYLES = ('eager', 'graph')


class Style:
    """Variables, updates and values for one TF style.

    In ``'graph'`` style `graph` is the test's own fresh ``tf.Graph`` (the
    default graph during the test) and `session` its default session; in
    ``'eager'`` style both are None.
    """

    def __init__(self, name, graph=None, session=None):
        if name not in STYLES:
            raise ValueError(f'`name` must be one of {STYLES}, got {name!r}')
        self.name = name
        self.graph = graph
        self.session = session

    def __repr__(self):
        return f'Style({self.name!r})'

    @property
    def is_graph(self):
        return self.name == 'graph'

    def variable(self, initial, name, dtype='float32'):
        """A ``tf.Variable`` holding `initial` (float32 unless `dtype` says otherwise),
        already initialized in graph style."""
        import tensorflow as tf
        var = tf.Variable(initial, name=name, dtype=dtype)
        if self.is_graph:
            self.session.run(var.initializer)
        return var

    def updater(self, var, delta):
        """A no-argument callable that adds `delta` to `var`: a ``tf.function``
        call in eager style, a ``session.run`` of one ``assign_add`` op in graph style."""
        import tensorflow as tf
        if self.is_graph:
            op = var.assign_add(tf.constant(delta, dtype=var.dtype))
            return lambda: self.session.run(op)
        delta = tf.constant(delta, dtype=var.dtype)
        add = tf.function(lambda: var.assign_add(delta))
        return lambda: add()

    def computed(self, fn):
        """A callable ``f(x)`` returning ``fn(x)`` computed by TensorFlow from a float
        `x`, as numpy: through a fed placeholder and ``session.run`` in graph style."""
        import tensorflow as tf
        if self.is_graph:
            fed = tf.compat.v1.placeholder(tf.float32, [])
            out = fn(fed)
            return lambda x: self.session.run(out, feed_dict={fed: x})
        return lambda x: fn(tf.constant(x, dtype=tf.float32)).numpy()

    def fed(self, fn, *shapes):
        """A callable ``f(*arrays)`` that runs ``fn(*inputs)`` (assign ops, say) on
        float32 inputs of `shapes` and returns its results as numpy: one
        ``session.run`` fed through placeholders in graph style, a ``tf.function``
        call in eager style."""
        import tensorflow as tf
        if self.is_graph:
            inputs = [tf.compat.v1.placeholder(tf.float32, shape) for shape in shapes]
            out = fn(*inputs)
            return lambda *arrays: self.session.run(out, feed_dict=dict(zip(inputs, arrays)))
        run = tf.function(fn)
        return lambda *arrays: tf.nest.map_structure(
            lambda t: t.numpy(), run(*[tf.constant(a, tf.float32) for a in arrays]))

    def value(self, x):
        """The numpy value of a tensor or variable `x`."""
        if self.is_graph:
            return self.session.run(x)
        return x.numpy()

    def assign(self, var, value):
        """Set `var` to `value` (one ``session.run`` of an ``assign`` op in graph style)."""
        if self.is_graph:
            self.session.run(var.assign(value))
        else:
            var.assign(value)

    @contextlib.contextmanager
    def new_run(self):
        """A later run of the same program, as a new process would build it.

        In graph style the block gets a fresh ``tf.Graph`` and its default session
        (`graph` and `session` point at them until the block ends, when the session
        is closed: read values inside it); in eager style nothing changes, as new
        eager variables are already new objects.
        """
        if not self.is_graph:
            yield self
            return
        import tensorflow as tf
        outer = self.graph, self.session
        graph = tf.Graph()
        with graph.as_default(), tf.compat.v1.Session(graph=graph) as session:
            self.graph, self.session = graph, session
            try:
                yield self
            finally:
                self.graph, self.session = outer
