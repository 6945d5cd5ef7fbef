-- A run also publishes each judged node's state on its Slurm node (`Extra` JSON: issue 69,
-- and issue 67's acceptance with observed findings shown where Slurm shows nodes): the
-- action `publish` joins the others. SQLite cannot change a CHECK constraint in place, so
-- the table is rebuilt, its rows and index kept.
CREATE TABLE slurm_actions_v15 (
    run_id  TEXT NOT NULL REFERENCES runs(id),
    seq     INTEGER NOT NULL,
    host    TEXT NOT NULL,
    node    TEXT NOT NULL,
    at      REAL NOT NULL,
    action  TEXT NOT NULL
            CHECK (action IN ('drain', 'resume', 'restore', 'keep', 'hold-back', 'refuse',
                              'publish')),
    reason  TEXT NOT NULL,
    result  TEXT NOT NULL CHECK (result IN ('done', 'failed', 'shadow', 'none')),
    detail  TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
INSERT INTO slurm_actions_v15 (run_id, seq, host, node, at, action, reason, result, detail)
    SELECT run_id, seq, host, node, at, action, reason, result, detail FROM slurm_actions;
DROP TABLE slurm_actions;
ALTER TABLE slurm_actions_v15 RENAME TO slurm_actions;
CREATE INDEX slurm_actions_by_host ON slurm_actions(host, at)
