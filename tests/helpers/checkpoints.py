"""Read a loop's checkpoints back: the folder, its index, variables and state.

`root` is a loop's ``checkpoint_dir`` (its checkpoints are in ``root/checkpoint``);
`path` is one checkpoint directory (``root/checkpoint/checkpoint.dat-STEP``).
"""

import json
import os

INDEX_NAME = 'checkpoint_index.json'


def checkpoint_path(root, step):
    """The directory of the checkpoint a loop with ``checkpoint_dir=root`` saved at `step`."""
    return os.path.join(str(root), 'checkpoint', f'checkpoint.dat-{step}')


def checkpoint_listing(root):
    """The entries of ``root/checkpoint``, sorted."""
    return sorted(os.listdir(os.path.join(str(root), 'checkpoint')))


def checkpoint_index(root, key='checkpoints'):
    """The index file of ``root/checkpoint``: its `key` entry, or all of it with ``key=None``."""
    with open(os.path.join(str(root), 'checkpoint', INDEX_NAME)) as f:
        index = json.load(f)
    return index if key is None else index[key]


def checkpoint_variable(path, name):
    """The value of the variable `name` in the checkpoint directory `path`."""
    import tensorflow as tf
    return tf.train.load_variable(os.path.join(str(path), 'variables'), name)


def checkpoint_variable_names(path):
    """The sorted names of the variables in the checkpoint directory `path`."""
    import tensorflow as tf
    return sorted(name for name, _ in tf.train.list_variables(os.path.join(str(path),
                                                                            'variables')))


def checkpoint_state(path):
    """The data-only state (loop state and saved objects) of the checkpoint directory `path`."""
    from tfsnippet.scaffold.checkpoint.state_format import read_state
    return read_state(str(path))


def saved_loop_state(root, step):
    """The loop's own state in the checkpoint saved at `step` under `root`."""
    from tfsnippet.scaffold.checkpoint.saver import LOOP_STATE_KEY
    return checkpoint_state(checkpoint_path(root, step))['objects'][LOOP_STATE_KEY]['loop']
