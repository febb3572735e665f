import tensorflow as tf


def test_main_process_runs_eagerly():
    assert tf.executing_eagerly()


def test_a_style_test_runs_in_its_own_tf_style(style):
    # [eager] here, [graph] in the graph-mode child process in a fresh graph
    assert tf.executing_eagerly() == (style.name == 'eager')
    if style.is_graph:
        assert tf.compat.v1.get_default_graph() is style.graph
        assert tf.compat.v1.get_default_session() is style.session
        assert style.graph.get_operations() == []
    w = style.variable([1., 2.], 'w')
    step = style.updater(w, [0.5, 1.])
    step()
    step()
    assert style.value(w).tolist() == [2., 4.]
    assert style.computed(lambda x: x * 3.)(1.5) == 4.5
