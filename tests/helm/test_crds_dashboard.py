"""What the chart ships besides the operator: its CRDs and the Grafana dashboard, checked against their sources.

Why it exists: the chart's crds/ must be the generated CRD (tests/validation/test_crd.py compares the content)
plus kopf's peering CRDs under the exact names kopf looks for, and nothing else; and a dashboard whose
queries name series nobody exports shows empty panels, which is only discovered in production. The
dashboard's series are checked against the vLLM metrics of the engine contract (contract/vllm_metrics.py,
from the vllm 0.25.1 sdist's vllm/v1/metrics/loggers.py) and the operator's own series
(controller/operator_metrics.py); every series the chart's alerts read has a panel.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml
from kopf._cogs.structs import references

from ascend_operator.contract import vllm_metrics as contract_metrics
from ascend_operator.controller.operator_metrics import EXPORTED
from ascend_operator.crd import build_crd
from tests.helm.chart import CHART, ROOT, Helm, one

KSM_SERIES = {"kube_pod_status_ready", "kube_pod_labels", "up"}
REQUIRED_PANELS = {
    "Degraded services",
    "Engines out of service",
    "Canary failures",
    "Stall and drift rolls",
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


#: Suffixes Prometheus exposes for a counter or histogram family the health code reads by family name.
SUFFIXES = ("", "_total", "_bucket", "_count", "_sum")


def _vllm_series() -> set[str]:
    """Every series name of the vLLM families the operator reads, per the engine contract
    (contract/vllm_metrics.py READ, each with its vllm 0.25.1 source line)."""
    return {m.name + suffix for m in contract_metrics.READ for suffix in SUFFIXES}


def _exported_series() -> set[str]:
    return _vllm_series() | EXPORTED


SERIES = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
#: Label matchers, ranges and strings: what follows a series name and is not one.
NOT_NAMES = re.compile(r'\{[^}]*\}|\[[^\]]*\]|"[^"]*"')


def _named(exprs: list[str]) -> set[str]:
    """Series names in PromQL expressions: vLLM's (with a colon), the operator's, kube-state-metrics', up."""
    used = {name for e in exprs for name in SERIES.findall(NOT_NAMES.sub(" ", e))}
    return {n for n in used if ":" in n or n.startswith(("ascend_operator_", "kube_")) or n == "up"}


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
    for panel in panels.values():
        assert panel["targets"], panel["title"]
    series = _named([t["expr"] for p in panels.values() for t in p["targets"]])
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


def test_every_series_an_alert_reads_has_a_panel_and_is_exported(helm: Helm) -> None:
    dashboard = _dashboard(helm)
    on_panels = _named([t["expr"] for p in dashboard["panels"] for t in p["targets"]])
    rule = one(helm.template(sets=["prometheusRule.enabled=true"]), "PrometheusRule")
    for alert in (r for g in rule["spec"]["groups"] for r in g["rules"]):
        read = _named([alert["expr"]])
        assert read, alert["alert"]
        assert read <= _exported_series(), f"{alert['alert']} reads series nobody exports: {read - _exported_series()}"
        assert read <= on_panels, f"{alert['alert']} reads {sorted(read - on_panels)}, which no dashboard panel shows"


def test_contract_holds_the_vllm_families_the_dashboard_needs() -> None:
    # the check above is only as strict as this list: it must hold vLLM's names, not be empty or widened
    assert {"vllm:kv_cache_usage_perc", "vllm:num_requests_running", "vllm:generation_tokens_total"} <= _vllm_series()
    assert all(name.startswith("vllm:") for name in _vllm_series())
