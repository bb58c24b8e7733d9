"""What the chart ships besides the operator: its CRDs and the Grafana dashboard, checked against their sources.

Why it exists: the chart's crds/ must be the generated CRD (tests/unit/test_crd.py compares the content)
plus kopf's peering CRDs under the exact names kopf looks for, and nothing else; and a dashboard whose
queries name series nobody exports shows empty panels, which is only discovered in production. The
dashboard's series are checked against the simulator's vLLM exposition and the operator's own counters.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml
from kopf._cogs.structs import references
from prometheus_client.parser import text_string_to_metric_families

from aissim.metrics import VllmMetrics
from ascend_operator.api.crd import build_crd
from ascend_operator.controller.metrics import EXPORTED
from tests.helm.chart import CHART, ROOT, Helm, one

KSM_SERIES = {"kube_pod_status_ready", "kube_pod_labels", "up"}
REQUIRED_PANELS = {
    "Generation tokens/s",
    "Time to first token",
    "Time per output token",
    "KV-cache usage",
    "Speculative decoding acceptance length",
    "Operator rolls by reason",
    "Ready replicas",
}


def _crds() -> dict[str, dict[str, Any]]:
    docs = [d for f in sorted((CHART / "crds").glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    return {d["metadata"]["name"]: d for d in docs}


def test_chart_crds_are_the_generated_crd_and_kopfs_peering_crds() -> None:
    crds = _crds()
    assert set(crds) == {
        build_crd()["metadata"]["name"],
        "clusterkopfpeerings.kopf.dev",
        "kopfpeerings.kopf.dev",
    }
    for selector, scope in (
        (references.CLUSTER_PEERINGS_K, "Cluster"),
        (references.NAMESPACED_PEERINGS_K, "Namespaced"),
    ):
        crd = crds[f"{selector.any_name}.{selector.group}"]
        assert crd["spec"]["scope"] == scope
        assert [v["name"] for v in crd["spec"]["versions"]] == [selector.version]
    repo_copy = ROOT / "crds" / "inference.ascend.dev_ascendinferenceservices.yaml"
    chart_copy = CHART / "crds" / repo_copy.name
    assert chart_copy.read_bytes() == repo_copy.read_bytes(), "run `make crd`"


def _exported_series() -> set[str]:
    sim = VllmMetrics(
        model_name="m", num_engines=1, max_model_len=4096, num_spec_tokens=7, cache_config_info={"block_size": "128"}
    )
    names = {s.name for fam in text_string_to_metric_families(sim.exposition().decode()) for s in fam.samples}
    return names | EXPORTED


def _dashboard(helm: Helm) -> dict[str, Any]:
    configmap = one(helm.template(), "ConfigMap")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    (text,) = configmap["data"].values()
    dashboard: dict[str, Any] = json.loads(text)
    return dashboard


def test_dashboard_panels_query_series_that_are_exported(helm: Helm) -> None:
    dashboard = _dashboard(helm)
    panels = {p["title"]: p for p in dashboard["panels"]}
    assert set(panels) >= REQUIRED_PANELS
    exported = _exported_series() | KSM_SERIES
    identifier = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*(?=\s*[{\[])")
    used = set()
    for panel in panels.values():
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            used |= set(identifier.findall(target["expr"]))
    series = {name for name in used if ":" in name or name.startswith(("ascend_operator_", "kube_")) or name == "up"}
    assert "ascend_operator_rolls_total" in series
    assert "vllm:kv_cache_usage_perc" in series
    assert series <= exported, f"series nobody exports: {sorted(series - exported)}"


def test_dashboard_groups_by_the_label_the_pod_monitor_sets(helm: Helm) -> None:
    dashboard = _dashboard(helm)
    monitor = one(helm.template(sets=["engineMonitor.enabled=true"]), "PodMonitor")
    relabel = monitor["spec"]["podMetricsEndpoints"][0]["relabelings"][0]
    assert relabel["sourceLabels"] == ["__meta_kubernetes_pod_label_inference_ascend_dev_service"]
    label = relabel["targetLabel"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["ais"]["query"]["query"].endswith(f", {label})")
    engine_exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"] if "vllm:" in t["expr"]]
    assert engine_exprs
    assert all(f'{label}=~"$ais"' in e for e in engine_exprs)


def test_pod_monitor_selects_engine_pods_by_the_renderers_label_and_port() -> None:
    from ascend_operator.api.parse import parse_resource
    from ascend_operator.render.pod import Owner, build_pod

    example = yaml.safe_load((ROOT / "examples" / "dsv4-flash.yaml").read_text())
    parsed = parse_resource({**example, "metadata": {**example["metadata"], "namespace": "x"}})
    pod = build_pod(parsed.spec, owner=Owner(name=parsed.name, namespace="x"), replica=0)
    assert "inference.ascend.dev/service" in pod["metadata"]["labels"]
    assert [p["name"] for p in pod["spec"]["containers"][0]["ports"]] == ["http"]
    template = (CHART / "templates" / "podmonitor.yaml").read_text()
    assert "key: inference.ascend.dev/service" in template
    assert "- port: http" in template
