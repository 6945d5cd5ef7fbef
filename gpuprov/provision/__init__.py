"""`gpuprov provision`: the playbook through ansible-runner, its progress and its outcome."""
