"""Issue 72: a change goes one NVL72 rack at a time. The playbook takes each rack's trays
together, rack after rack, then the hosts of no rack; a rack that does not converge stops the
run before the next rack is touched (the playbook itself faked here: which hosts each run is
given is what is judged)."""

from pathlib import Path

from gpuprov.model import HostOutcome, Outcome
from gpuprov.provision import service
from gpuprov.provision.runner import Options

RACK_OF = {"a1": "rack-a", "a2": "rack-a", "b1": "rack-b", "b2": "rack-b"}


def test_each_rack_s_trays_go_together_rack_after_rack_then_the_rest():
    assert service.rack_batches(["h1", "b1", "a1", "h2", "a2", "b2"], RACK_OF) == [
        ("rack-b", ["b1", "b2"]), ("rack-a", ["a1", "a2"]), (None, ["h1", "h2"])]
    assert service.rack_batches(["h1", "h2"], {}) == [(None, ["h1", "h2"])]


def test_a_rack_that_does_not_converge_stops_the_run_before_the_next(tmp_path, monkeypatch):
    runs = []

    def playbook(run_dir, run_id, options, view):
        runs.append((run_id, options.hosts))
        failed = {"b2"}
        log = run_dir / "artifacts" / run_id / "stdout"
        log.parent.mkdir(parents=True)
        log.write_text("")
        return [HostOutcome(h, Outcome.FAILED if h in failed else Outcome.CONVERGED)
                for h in options.hosts], log, {}

    monkeypatch.setattr(service, "run_playbook", playbook)
    said = []
    options = Options(inventory=Path("hosts.ini"), hosts=["b1", "b2", "a1", "a2", "h1"])
    outcomes, log, _ = service._run_by_rack(tmp_path, "p1", options, None, RACK_OF,
                                            said.append)
    assert runs == [("p1", ["b1", "b2"])]
    assert {o.host: o.outcome for o in outcomes} == {
        "b1": "converged", "b2": "failed", "a1": "failed", "a2": "failed", "h1": "failed"}
    assert outcomes[2].detail == ("not provisioned: rack rack-b did not converge first (a "
                                  "change goes one rack at a time)")
    assert said == ["rack rack-b: 2 host(s) (1 of 3)"] and log.name == "stdout"

    runs.clear()
    options = Options(inventory=Path("hosts.ini"), hosts=["a1", "a2", "h1"])
    outcomes, log, _ = service._run_by_rack(tmp_path / "2", "p2", options, None, RACK_OF,
                                            said.append)
    assert runs == [("p2", ["a1", "a2"]), ("p2-2", ["h1"])]
    assert {o.outcome for o in outcomes} == {"converged"} and log == tmp_path / "2/artifacts"


def test_a_tray_s_inputs_change_with_its_rack_s_members_so_it_is_not_skipped_in_sync():
    from types import SimpleNamespace

    def request(members):
        inventory = SimpleNamespace(settings=lambda host: {"gpuprov_rack": "rack-a"})
        racks = {"rack-a": {"imex": "domain", "members": members}}
        return SimpleNamespace(locks={"a1": {"driver_version": "590.48.01"}},
                               inventory=inventory, rack_of={"a1": "rack-a"},
                               playbook=Options(inventory=Path("h"), hosts=["a1"], racks=racks))

    eighteen = [f"10.0.0.{i}" for i in range(1, 19)]
    assert service.host_inputs(request(eighteen), "a1", None) == \
        service.host_inputs(request(list(eighteen)), "a1", None)
    assert service.host_inputs(request(eighteen), "a1", None) != \
        service.host_inputs(request(eighteen[:17]), "a1", None)
