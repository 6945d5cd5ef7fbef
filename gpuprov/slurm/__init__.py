"""gpuprov's verdicts in Slurm: drain before a run, drain or resume after it (`--slurm`)."""
