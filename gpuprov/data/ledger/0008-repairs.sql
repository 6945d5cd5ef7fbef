-- `gpuprov nodes NODE --repaired NOTE`: a person's record that a node was repaired: the
-- rejections before it no longer make the node a repeat offender (issue 41)
CREATE TABLE repairs (
    node        TEXT NOT NULL,
    at          REAL NOT NULL,
    note        TEXT NOT NULL,          -- the ticket, what was done
    recorded_by TEXT NOT NULL,          -- user@controller
    PRIMARY KEY (node, at)
)
