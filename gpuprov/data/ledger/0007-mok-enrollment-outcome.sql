-- a host whose module signing key waits for enrollment at the console (Secure Boot):
-- a new outcome, so the table is rebuilt with the wider CHECK, rows kept as they were
CREATE TABLE host_outcomes_new (
    run_id         TEXT NOT NULL REFERENCES runs(id),
    host           TEXT NOT NULL,
    outcome        TEXT NOT NULL
                   CHECK (outcome IN ('converged', 'failed', 'unreachable', 'reboot-pending',
                                      'mok-enrollment-pending')),
    ok             INTEGER NOT NULL,
    changed        INTEGER NOT NULL,
    failed         INTEGER NOT NULL,
    unreachable    INTEGER NOT NULL,
    reboot_pending INTEGER NOT NULL,
    detail         TEXT NOT NULL,
    PRIMARY KEY (run_id, host)
);
INSERT INTO host_outcomes_new (run_id, host, outcome, ok, changed, failed, unreachable,
                               reboot_pending, detail)
    SELECT run_id, host, outcome, ok, changed, failed, unreachable, reboot_pending, detail
    FROM host_outcomes;
DROP TABLE host_outcomes;
ALTER TABLE host_outcomes_new RENAME TO host_outcomes;
CREATE INDEX host_outcomes_by_host ON host_outcomes(host)
