-- Each evidence file's SHA-256 as it was when the node was judged (JSON: path -> sha256),
-- so that `gpuprov certify` signs only the evidence that was judged and names a file that
-- changed since (issue 67). NULL for verdicts recorded before: their evidence was never
-- fingerprinted, and a digest taken now would vouch for whatever the files hold today.
ALTER TABLE node_results ADD COLUMN evidence_manifest TEXT
