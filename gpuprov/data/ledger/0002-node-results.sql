CREATE TABLE node_results (
    run_id       TEXT NOT NULL REFERENCES runs(id),
    node         TEXT NOT NULL,
    -- what the evaluators found (the verdict stays NULL until the run finishes)
    judged       TEXT NOT NULL CHECK (judged IN ('accepted', 'rejected', 'unreachable')),
    verdict      TEXT CHECK (verdict IN ('accepted', 'rejected', 'unreachable')),
    profile      TEXT NOT NULL,
    reason       TEXT NOT NULL,         -- one line: the failing checks, or why unreachable
    evidence_dir TEXT NOT NULL,
    started_at   REAL NOT NULL,
    judged_at    REAL NOT NULL,
    PRIMARY KEY (run_id, node)
);
CREATE INDEX node_results_by_node ON node_results(node);
CREATE TABLE check_results (
    run_id     TEXT NOT NULL,
    node       TEXT NOT NULL,
    check_id   TEXT NOT NULL,
    status     TEXT NOT NULL CHECK (status IN ('pass', 'fail', 'warn', 'missing', 'skip')),
    summary    TEXT NOT NULL,
    gpu_index  INTEGER,
    gpu_bus_id TEXT,
    gpu_serial TEXT,
    measured   TEXT NOT NULL,           -- JSON: the values the check judged
    PRIMARY KEY (run_id, node, check_id),
    FOREIGN KEY (run_id, node) REFERENCES node_results(run_id, node)
);
CREATE TABLE node_gpus (
    run_id    TEXT NOT NULL,
    node      TEXT NOT NULL,
    gpu_index INTEGER NOT NULL,
    bus_id    TEXT,
    serial    TEXT,
    uuid      TEXT,
    name      TEXT,
    PRIMARY KEY (run_id, node, gpu_index),
    FOREIGN KEY (run_id, node) REFERENCES node_results(run_id, node)
);
CREATE INDEX node_gpus_by_serial ON node_gpus(serial);
