"""The chart's own NetworkPolicy, the operator's readinessProbe, and the identity the operator gets for
the engines' NetworkPolicies: the pods the chart runs must be the pods every engine policy admits."""

from __future__ import annotations

from ascend_operator.cli.main import build_parser
from ascend_operator.cli.operator import operator_peer
from tests.helm.chart import Helm, one, operator_container, pick


def test_operator_identity_args_name_the_release_namespace_and_the_pod_labels(helm: Helm) -> None:
    objects = helm.template()
    args = build_parser().parse_args(operator_container(objects)["args"])
    peer = operator_peer(args)
    deployment = one(objects, "Deployment")
    assert peer.namespace == deployment["metadata"]["namespace"] == "ascend-system"
    assert peer.pod_labels == deployment["spec"]["selector"]["matchLabels"]
    assert peer.pod_labels.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def test_operator_is_ready_only_when_kopf_serves_healthz(helm: Helm) -> None:
    container = operator_container(helm.template(sets=["readinessProbe.periodSeconds=7"]))
    assert container["readinessProbe"] == {
        "httpGet": {"path": "/healthz", "port": "health"},
        "initialDelaySeconds": 5,
        "periodSeconds": 7,
        "timeoutSeconds": 5,
        "failureThreshold": 3,
    }


def test_operator_network_policy_is_off_by_default(helm: Helm) -> None:
    assert not pick(helm.template(), "NetworkPolicy")


def test_operator_network_policy_admits_probes_and_scrapes_and_reaches_api_and_engines(helm: Helm) -> None:
    sets = [
        "networkPolicy.enabled=true",
        "networkPolicy.apiServer.cidrs={10.96.0.1/32,192.0.2.10/32}",
        "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.name=monitoring",
    ]
    objects = helm.template(sets=sets)
    policy = one(objects, "NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"] == one(objects, "Deployment")["spec"]["selector"]["matchLabels"]
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert policy["spec"]["ingress"] == [
        {"ports": [{"protocol": "TCP", "port": "health"}]},
        {
            "ports": [{"protocol": "TCP", "port": "metrics"}],
            "from": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}],
        },
    ]
    assert policy["spec"]["egress"] == [
        {
            "ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}],
            "to": [{"ipBlock": {"cidr": "10.96.0.1/32"}}, {"ipBlock": {"cidr": "192.0.2.10/32"}}],
        },
        {
            "to": [
                {
                    "namespaceSelector": {},
                    "podSelector": {
                        "matchExpressions": [{"key": "inference.ascend.dev/service", "operator": "Exists"}]
                    },
                }
            ]
        },
    ]


def test_without_cidrs_or_metrics_the_rules_stay_well_formed(helm: Helm) -> None:
    policy = one(helm.template(sets=["networkPolicy.enabled=true", "metrics.enabled=false"]), "NetworkPolicy")
    assert policy["spec"]["ingress"] == [{"ports": [{"protocol": "TCP", "port": "health"}]}]
    assert policy["spec"]["egress"][0] == {
        "ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}]
    }
