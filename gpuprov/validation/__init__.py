"""Validation: the node-side probes, the collectors over testinfra, the per-node stages
and the rack's fabric stage, the parallel pipeline that runs them."""
