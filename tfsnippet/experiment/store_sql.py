"""The layout of the results store's SQLite database, and the statements that write it.

Kept apart from :mod:`.store` (which reads and writes through these) so
that the layout reads in one place; a change to it bumps
:data:`SCHEMA_VERSION`.
"""

from __future__ import annotations

__all__ = ['DB_FILENAME', 'SCHEMA_VERSION', 'SCHEMA_SQL', 'UPSERT_EPOCH_METRIC', 'FORGET_EPOCHS',
           'UPSERT_RESULT_METRIC', 'RUN_COLUMNS', 'IN_CHUNK']

DB_FILENAME = 'results.sqlite'
"""The name of the database file inside a store's root directory."""

SCHEMA_VERSION = 1
"""The layout of the database, kept in SQLite's ``user_version``."""


SCHEMA_SQL = """
CREATE TABLE runs (
    run_id    TEXT PRIMARY KEY,
    name      TEXT NOT NULL,
    status    TEXT NOT NULL,
    created   REAL NOT NULL,
    heartbeat REAL NOT NULL,
    ended     REAL,
    epoch     INTEGER,
    step      INTEGER,
    config    TEXT NOT NULL,
    meta      TEXT NOT NULL
);
CREATE INDEX runs_by_created ON runs (created, run_id);
CREATE TABLE config (
    run_id TEXT NOT NULL, key TEXT NOT NULL, value,
    PRIMARY KEY (run_id, key)
) WITHOUT ROWID;
CREATE TABLE epochs (
    run_id TEXT NOT NULL, epoch INTEGER NOT NULL, name TEXT NOT NULL,
    step INTEGER NOT NULL, mean REAL, std REAL, count INTEGER,
    PRIMARY KEY (run_id, epoch, name)
) WITHOUT ROWID;
CREATE TABLE metrics (
    run_id TEXT NOT NULL, name TEXT NOT NULL, value REAL,
    epoch INTEGER, source TEXT NOT NULL,
    PRIMARY KEY (run_id, name)
) WITHOUT ROWID;
CREATE TABLE best (
    run_id TEXT NOT NULL, name TEXT NOT NULL, value REAL,
    PRIMARY KEY (run_id, name)
) WITHOUT ROWID;
CREATE TABLE results (
    run_id TEXT NOT NULL, name TEXT NOT NULL, value REAL,
    PRIMARY KEY (run_id, name)
) WITHOUT ROWID;
CREATE INDEX config_by_value ON config (key, value);
CREATE INDEX metrics_by_value ON metrics (name, value);
CREATE INDEX best_by_value ON best (name, value);
CREATE INDEX results_by_value ON results (name, value);
CREATE TABLE fields (
    kind TEXT NOT NULL, name TEXT NOT NULL,
    PRIMARY KEY (kind, name)
) WITHOUT ROWID;
"""

# Latest epoch value of a metric; a final result of the same name is never replaced.
UPSERT_EPOCH_METRIC = """
INSERT INTO metrics (run_id, name, value, epoch, source) VALUES (?, ?, ?, ?, 'epoch')
ON CONFLICT (run_id, name) DO UPDATE SET value = excluded.value, epoch = excluded.epoch
WHERE metrics.source = 'epoch' AND excluded.epoch >= metrics.epoch
"""
# Forget the epochs of a run from one on (`:run` the run id, `:epoch` that epoch, in
# each statement): their rows, the latest epoch values they gave, and the run's last epoch.
FORGET_EPOCHS = (
    'DELETE FROM epochs WHERE run_id = :run AND epoch >= :epoch',
    "DELETE FROM metrics WHERE run_id = :run AND source = 'epoch' AND epoch >= :epoch",
    """INSERT INTO metrics (run_id, name, value, epoch, source)
SELECT e.run_id, e.name, e.mean, e.epoch, 'epoch' FROM epochs e
WHERE e.run_id = :run AND e.epoch = (SELECT MAX(epoch) FROM epochs
                                   WHERE run_id = :run AND name = e.name)
ON CONFLICT (run_id, name) DO NOTHING""",
    """UPDATE runs SET epoch = (SELECT MAX(epoch) FROM epochs WHERE run_id = :run),
    step = (SELECT step FROM epochs WHERE run_id = :run ORDER BY epoch DESC, step DESC LIMIT 1)
WHERE run_id = :run AND epoch >= :epoch""",
)
UPSERT_RESULT_METRIC = """
INSERT INTO metrics (run_id, name, value, epoch, source) VALUES (?, ?, ?, NULL, 'results')
ON CONFLICT (run_id, name) DO UPDATE SET value = excluded.value, epoch = NULL,
    source = 'results'
"""

RUN_COLUMNS = 'run_id, name, status, created, heartbeat, ended, epoch, step, config, meta'
IN_CHUNK = 500   # run ids per `IN (...)` list, well under SQLite's limit on bound parameters
