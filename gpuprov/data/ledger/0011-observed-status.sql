-- status observed (model.Status): a finding of a check in observe mode (config observe),
-- reported and never blocking. SQLite cannot change a column's CHECK in place: the table
-- is rebuilt with the same columns, keys and rows (no semicolon in these comments:
-- statements are split on it)
CREATE TABLE check_results_v11 (
    run_id     TEXT NOT NULL,
    node       TEXT NOT NULL,
    check_id   TEXT NOT NULL,
    status     TEXT NOT NULL CHECK (status IN ('pass', 'fail', 'warn', 'missing', 'skip', 'observed')),
    summary    TEXT NOT NULL,
    gpu_index  INTEGER,
    gpu_bus_id TEXT,
    gpu_serial TEXT,
    measured   TEXT NOT NULL,
    action     TEXT NOT NULL DEFAULT 'none'
        CHECK (action IN ('none', 'fix-setup', 'restart-workload', 'reset-gpu', 'reboot',
                          'reseat-or-inspect', 'rma')),
    seq        INTEGER,
    PRIMARY KEY (run_id, node, check_id),
    FOREIGN KEY (run_id, node) REFERENCES node_results(run_id, node)
);
INSERT INTO check_results_v11 (run_id, node, check_id, status, summary, gpu_index, gpu_bus_id,
                               gpu_serial, measured, action, seq)
    SELECT run_id, node, check_id, status, summary, gpu_index, gpu_bus_id, gpu_serial,
           measured, action, seq FROM check_results;
DROP TABLE check_results;
ALTER TABLE check_results_v11 RENAME TO check_results
