CREATE TABLE runs (
    id          TEXT PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('provision', 'validate')),
    started_at  REAL NOT NULL,
    finished_at REAL,
    status      TEXT NOT NULL CHECK (status IN ('running', 'finished')),
    pid         INTEGER NOT NULL,
    inventory   TEXT NOT NULL,
    hosts       TEXT NOT NULL,          -- JSON list, the hosts the run targeted
    options     TEXT NOT NULL,          -- JSON: check, limit, tags, serial, ...
    lock        TEXT NOT NULL,          -- JSON: host -> effective versions lock
    log_path    TEXT
);
CREATE TABLE host_outcomes (
    run_id         TEXT NOT NULL REFERENCES runs(id),
    host           TEXT NOT NULL,
    outcome        TEXT NOT NULL
                   CHECK (outcome IN ('converged', 'failed', 'unreachable', 'reboot-pending')),
    ok             INTEGER NOT NULL,
    changed        INTEGER NOT NULL,
    failed         INTEGER NOT NULL,
    unreachable    INTEGER NOT NULL,
    reboot_pending INTEGER NOT NULL,
    detail         TEXT NOT NULL,       -- one line: the failing task and its message
    PRIMARY KEY (run_id, host)
);
CREATE INDEX host_outcomes_by_host ON host_outcomes(host);
