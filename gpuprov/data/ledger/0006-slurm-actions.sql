-- what a run did to Slurm (validate/provision --slurm), in order, and how it went
CREATE TABLE slurm_actions (
    run_id  TEXT NOT NULL REFERENCES runs(id),
    seq     INTEGER NOT NULL,
    host    TEXT NOT NULL,
    node    TEXT NOT NULL,          -- its Slurm node name
    at      REAL NOT NULL,
    action  TEXT NOT NULL
            CHECK (action IN ('drain', 'resume', 'restore', 'keep', 'hold-back', 'refuse')),
    reason  TEXT NOT NULL,          -- the drain reason set, or why
    result  TEXT NOT NULL CHECK (result IN ('done', 'failed', 'shadow', 'none')),
    detail  TEXT NOT NULL,          -- the error, the jobs still running, or empty
    PRIMARY KEY (run_id, seq)
);
CREATE INDEX slurm_actions_by_host ON slurm_actions(host, at)
