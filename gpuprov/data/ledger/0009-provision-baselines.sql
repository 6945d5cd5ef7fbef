-- what a host's full converged provisioning run left, so that the next run may skip a host
-- whose inputs and state are still the same (issue 41): its inputs' hash (never the
-- values), the files and units the run named and the host's snapshot (hashes, states)
CREATE TABLE provision_baselines (
    run_id      TEXT NOT NULL REFERENCES runs(id),
    host        TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    files       TEXT NOT NULL,          -- JSON list of paths
    units       TEXT NOT NULL,          -- JSON list of unit names
    snapshot    TEXT NOT NULL,          -- JSON: package list hash, file hashes, unit states
    PRIMARY KEY (run_id, host)
);
CREATE INDEX provision_baselines_by_host ON provision_baselines(host)
