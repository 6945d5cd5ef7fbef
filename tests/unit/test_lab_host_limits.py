"""`lab up` refuses a lab the kernel's inotify limit cannot hold, before creating a node
(past it a node's systemd cannot start and Docker restarts it in a loop)."""

import pytest

from gpuprov.errors import EnvironmentProblem
from gpuprov.lab import host_limits


def test_the_default_limit_holds_the_three_and_twelve_node_labs(tmp_path):
    limit = tmp_path / "max_user_instances"
    limit.write_text("128\n")
    for nodes in (3, 12):
        host_limits.check_room_for(nodes, limit)


def test_twenty_four_nodes_under_the_default_limit_name_the_fix(tmp_path):
    limit = tmp_path / "max_user_instances"
    limit.write_text("128\n")
    with pytest.raises(EnvironmentProblem, match=r"24 lab nodes need about 160 inotify "
                       r"instances and fs.inotify.max_user_instances is 128 .*bootstrap.sh.*"
                       r"sysctl -w fs.inotify.max_user_instances=1024"):
        host_limits.check_room_for(24, limit)
    limit.write_text(f"{host_limits.INOTIFY_FOR_THE_LAB}\n")      # what bootstrap.sh sets
    host_limits.check_room_for(24, limit)
