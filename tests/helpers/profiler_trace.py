"""Read a TensorFlow profiler trace (``plugins/profile/<run>/*.xplane.pb``) back."""

import collections
import glob
import os


def trace_files(logdir):
    """The ``.xplane.pb`` files of every profiler run under `logdir`, sorted."""
    return sorted(glob.glob(os.path.join(str(logdir), 'plugins', 'profile', '*', '*.xplane.pb')))


def trace_event_counts(logdir):
    """``Counter({event name: how many})`` of the events of every trace under `logdir`."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2
    counts = collections.Counter()
    for path in trace_files(logdir):
        with open(path, 'rb') as f:
            space = xplane_pb2.XSpace.FromString(f.read())
        for plane in space.planes:
            names = {key: meta.name for key, meta in plane.event_metadata.items()}
            for line in plane.lines:
                for event in line.events:
                    counts[names.get(event.metadata_id, '')] += 1
    return counts
