-- `gpuprov drift`: each host against its lock (read-only, so no run holds the host)
CREATE TABLE drift_checks (
    checked_at  REAL NOT NULL,
    host        TEXT NOT NULL,
    inventory   TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('in-sync', 'drifted', 'unreachable')),
    differences TEXT NOT NULL,          -- JSON list of {what, expected, found}, or why
    PRIMARY KEY (checked_at, host)
);
CREATE INDEX drift_checks_by_host ON drift_checks(host, checked_at)
