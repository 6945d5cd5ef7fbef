-- A node's parts, one record each, per validation (issue 68): each GPU's VBIOS beside its
-- identity, each compute NIC port and each NVSwitch. What certificates, part swaps, fleet
-- grouping and the RMA report read. Rows recorded before are backfilled from the values
-- their checks stored (ledger/schema.py BACKFILLS, run in this migration's transaction).
ALTER TABLE node_gpus ADD COLUMN vbios TEXT;
CREATE TABLE node_nics (
    run_id   TEXT NOT NULL,
    node     TEXT NOT NULL,
    port     TEXT NOT NULL,          -- ibstat's CA and port: mlx5_0 port 1
    guid     TEXT,
    psid     TEXT,
    firmware TEXT,
    PRIMARY KEY (run_id, node, port),
    FOREIGN KEY (run_id, node) REFERENCES node_results(run_id, node)
);
CREATE INDEX node_nics_by_guid ON node_nics(guid);
CREATE TABLE node_nvswitches (
    run_id   TEXT NOT NULL,
    node     TEXT NOT NULL,
    bus_id   TEXT NOT NULL,
    serial   TEXT,
    firmware TEXT,
    PRIMARY KEY (run_id, node, bus_id),
    FOREIGN KEY (run_id, node) REFERENCES node_results(run_id, node)
);
CREATE INDEX node_nvswitches_by_serial ON node_nvswitches(serial)
