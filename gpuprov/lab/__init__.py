"""The lab: a simulated rack of bare Debian servers in systemd containers on this machine."""
