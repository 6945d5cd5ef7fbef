"""Slurm's own health checks: gpuprov's node-local quick check between two validations."""
