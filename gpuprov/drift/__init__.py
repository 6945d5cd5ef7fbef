"""`gpuprov drift`: is every host still on its versions lock? One read-only SSH round trip
per host (probe.py), judged against the host's effective lock (expected.py)."""
