"""Read TensorBoard event files back as plain Python values."""

import os


def _accumulator(logdir, **size_guidance):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    accumulator = EventAccumulator(str(logdir), size_guidance=size_guidance)
    accumulator.Reload()
    return accumulator


def read_scalars(logdir, tag=None, *, in_step_order=True, ndigits=None):
    """``{tag: [(step, value), ...]}`` of every scalar in `logdir`.

    The pairs of a tag are sorted (by step, then value) unless `in_step_order`
    is false, which keeps the order they were read in; `ndigits` rounds the
    values.  With a `tag`, only that tag's list (an error if it is missing).
    """
    accumulator = _accumulator(logdir, scalars=0)

    def pairs(name):
        read = [(e.step, e.value if ndigits is None else round(e.value, ndigits))
                for e in accumulator.Scalars(name)]
        return sorted(read) if in_step_order else read

    if tag is not None:
        return pairs(tag)
    return {name: pairs(name) for name in accumulator.Tags()['scalars']}


def read_histograms(logdir, fields=('num',), *, in_step_order=False):
    """``{tag: [(step, *fields), ...]}`` of the histograms in `logdir`.

    `fields` name ``HistogramProto`` fields (``num``, ``min``, ``max``, ``sum``,
    ``sum_squares``, ``bucket_limit``, ``bucket``; repeated ones as lists).  The
    rows of a tag keep the order they were read in unless `in_step_order`.
    """
    accumulator = _accumulator(logdir, histograms=0)

    def row(event):
        values = [getattr(event.histogram_value, name) for name in fields]
        return (event.step, *(v if isinstance(v, (int, float)) else list(v) for v in values))

    def rows(tag):
        read = [row(e) for e in accumulator.Histograms(tag)]
        return sorted(read) if in_step_order else read

    return {tag: rows(tag) for tag in accumulator.Tags()['histograms']}


def read_events(logdir):
    """Every event of every event file in `logdir` as written, files in name order."""
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto import event_pb2
    events = []
    for name in sorted(os.listdir(logdir)):
        if name.startswith('events.out.tfevents.'):
            events.extend(event_pb2.Event.FromString(record) for record in
                          RawEventFileLoader(os.path.join(logdir, name)).Load())
    return events
