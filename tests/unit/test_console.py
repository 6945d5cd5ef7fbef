"""Text tables and the plain (non-terminal) progress lines of provision."""

import io

from gpuprov.console import text_table
from gpuprov.provision.progress import PlainView
from gpuprov.provision.runner import HostProgress


def test_text_table_pads_columns_and_leaves_the_last_free():
    table = text_table(("HOST", "OK", "DETAIL"), [("node01", 3, "fine"), ("n2", 120, None)],
                       right=("OK",))
    assert table.splitlines() == ["HOST     OK  DETAIL", "node01    3  fine",
                                  "n2      120  -"]


def test_plain_provision_progress_is_one_line_per_host_and_play_and_per_failure():
    out = io.StringIO()
    view = PlainView(["n1", "n2"], out)
    for role in ("nouveau", "cuda_repo", "nvidia_driver", "apt_source", "cuda_toolkit"):
        for host in ("n1", "n2"):
            view(host, "start", HostProgress(play="Driver stack", role=role, task="t"))
    view("n2", "ok", HostProgress(play="Driver stack", role="cudnn"))
    view("n1", "start", HostProgress(play="Containers", role="docker"))
    view("n2", "failed", HostProgress(play="Containers", role="docker", failed=1,
                                      detail="Install docker: no package"))
    assert out.getvalue().splitlines() == [
        "n1: Driver stack", "n2: Driver stack", "n1: Containers",
        "n2: FAILED: Install docker: no package"]
