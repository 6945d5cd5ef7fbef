"""The one way gpuprov reaches a host: SSH through testinfra and paramiko with the
inventory's connection settings, host keys checked (connect.py), and read-only probe
scripts run in one round trip (probing.py). Validation, the doctor, drift and the fabric
stage all use it."""
