-- What the controller saw in Slurm and did not do itself: a node the node-local quick check
-- (issue 70) drained, and when that drain was gone. Recorded when `gpuprov nodes --slurm`
-- reads Slurm, one row per change, reason '' once the quick check no longer holds the node.
CREATE TABLE quick_check_drains (
    host    TEXT NOT NULL,
    node    TEXT NOT NULL,
    at      REAL NOT NULL,
    state   TEXT NOT NULL,
    reason  TEXT NOT NULL,
    PRIMARY KEY (host, at)
);
CREATE INDEX quick_check_drains_by_host ON quick_check_drains(host, at)
