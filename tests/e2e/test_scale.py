"""`python -m perf.scale` end to end at N = 2: its own control plane, the operator, the shared simulator.

The benchmark itself (10 / 50 / 200 services) runs on demand, never here; this smoke run (about a minute
and a half on 2 shared cores) keeps its plumbing honest: every figure the README table shows comes out of
a real run, the operator's share excludes what other components send, and the load reached the engines.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perf import scale

pytestmark = pytest.mark.slow


def test_a_two_service_run_measures_the_operator_beside_the_direct_create(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the baseline must hold a lease renewal: KWOK renews every node's lease together about every 10 s
    # (hack/local-cluster: --node-lease-duration-seconds=40), and a 5 s baseline once held none
    argv = ["--services", "2", "--runs", "1", "--load", "--window", "8", "--baseline-window", "12"]
    assert scale.main([*argv, "--out", str(tmp_path), "--state", str(tmp_path / "state")]) == 0
    table, _, reactions = capsys.readouterr().out.partition("\n\n")
    assert [line.split("|")[1:3] for line in table.splitlines()[2:]] == [[" 2 ", " idle "], [" 2 ", " load "]]
    assert [line.split("|")[1:3] for line in reactions.splitlines()[2:]] == [[" 2 ", " 1 "]]
    (run,) = json.loads((tmp_path / "scale.json").read_text())["results"]
    assert len(run["direct_bound_s"]) == len(run["cr_bound_s"]) == 2
    assert all(0 < s < 60 for s in run["direct_bound_s"] + run["cr_bound_s"])
    # new services on the running fleet, one at a time, each beside a direct pod
    assert len(run["probe_cr_s"]) == len(run["probe_direct_s"]) == scale.PROBES
    assert all(0 < s < 60 for s in run["probe_cr_s"] + run["probe_direct_s"])
    # the operator's share (CR -> pod seen) is part of the whole (CR -> pod bound), never more
    # and the CR's own create call comes first: a write the direct path does not have
    assert len(run["probe_cr_seen_s"]) == len(run["probe_cr_call_s"]) == scale.PROBES
    for called, seen, bound in zip(run["probe_cr_call_s"], run["probe_cr_seen_s"], run["probe_cr_s"], strict=True):
        assert 0 < called <= bound
        assert 0 < seen <= bound
    idle = run["windows"]["idle"]
    assert idle["figures"]["operator_cores"] > 0
    assert 50 < idle["figures"]["operator_rss_mb"] < 1000
    assert idle["figures"]["requests_per_s"] == pytest.approx(sum(idle["operator_rates"].values()))
    # an idle fleet costs the API server nothing per pass: pods, Services, PDBs and NetworkPolicies come
    # from the operator's watch caches (before: a LIST and three GETs per service per pass, ~0.8/s here);
    # the attach process's own pod polling is in the baseline, so what is left is noise
    assert idle["operator_rates"].get("LIST pods", 0) < 0.3
    for read in ("GET services", "GET poddisruptionbudgets", "GET networkpolicies"):
        assert read not in idle["operator_rates"], idle["operator_rates"]
    # lease renewals and node heartbeats are never counted as the operator's own
    assert not [key for key in idle["operator_rates"] if key.split()[1] in ("leases", "nodes", "nodes/status")]
    assert "PUT leases" in run["baseline_rates"]
    assert run["load"]["sent"] >= 1
    assert run["load"]["ok"] == run["load"]["sent"]
    assert run["sim"]["engines"] == 2
    assert not list((tmp_path / "state").iterdir())  # every cluster went down
