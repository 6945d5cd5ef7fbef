"""The security floors' findings whole, in-process (the lock check's CLI tests say the same
through the command line): each breach's component, bulletin, message and cited source,
Debian version forms, and a malformed acceptance list (issue 52: mutation survivors)."""

import pytest

from gpuprov.errors import InputError
from gpuprov.security import Breach, accepted, breaches, upstream

BULLETIN_5821 = ("Security Bulletin: GPU Display Driver - May 2026, "
                 "https://nvidia.custhelp.com/app/answers/detail/a_id/5821/")


@pytest.mark.parametrize("version, release", [
    ("5:29.7.0-1~ubuntu.24.04~noble", "29.7.0"), ("1:4.5.3-1", "4.5.3"),
    ("590.48.01-0ubuntu1", "590.48.01"), ("1:2:3.0-1-2", "2:3.0"), ("1.19.1", "1.19.1"),
    ("4.4.1-1-1", "4.4.1")])
def test_upstream_drops_one_epoch_and_the_debian_revision(version, release):
    assert upstream(version) == release


def test_each_breach_whole_with_its_component_and_citation():
    found = breaches("550.127.08", "1.17.3-1", "5:28.5.1-1~ubuntu.24.04~noble", "4.4.1-1")
    assert [b.component for b in found] == ["driver", "container_toolkit", "docker", "dcgm"]
    assert found[0] == Breach(
        "driver", "nvidia-5821", "driver 550.127.08: branch R550 has no fixed release in "
        "bulletin nvidia-5821 (fixed branches: R535, R570, R580, R590, R595)", BULLETIN_5821)
    below = breaches("580.95.05", "1.19.1", "", "")
    assert below == [Breach("driver", "nvidia-5821", "driver 580.95.05 is below 580.159.03, "
                            "the R580 release that fixes bulletin nvidia-5821", BULLETIN_5821)]
    # the distribution's Docker (no version in the lock, or no version form) and no DCGM
    # are not judged
    assert breaches("590.48.01", "1.19.1", "", "") == []
    assert breaches("590.48.01", "1.19.1", "distro", "") == []


def test_an_acceptance_list_of_anything_but_bulletin_ids_is_bad_input():
    for value in ("nvidia-5821", ["nvidia-5821", 5821], {"nvidia-5821": True}):
        with pytest.raises(InputError) as refused:
            accepted({"gpuprov_security_accepted": value}, "host node01")
        assert str(refused.value) == (f"host node01: gpuprov_security_accepted: expected a "
                                      f"list of bulletin ids, got {value!r}")
    assert accepted({"gpuprov_security_accepted": ["nvidia-5821"]}, "h") == {"nvidia-5821"}
