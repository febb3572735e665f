"""Look up past runs in a results store: ``spt.results.query(root, where=..., order_by=...)``.

From a shell: ``python -m tfsnippet.results ROOT list|show RUN|compare RUN RUN...|export --csv``.
ROOT may be a local folder or the URL of a root of runs on object storage
(``s3://bucket/runs``), read through a local index (:mod:`tfsnippet.experiment.remote`).
"""

from __future__ import annotations

from ..experiment.query import parse_order_by, parse_where, query
from ..experiment.store import EpochRow, ResultsStore, RunRow

__all__ = ['query', 'parse_where', 'parse_order_by', 'ResultsStore', 'RunRow', 'EpochRow']
