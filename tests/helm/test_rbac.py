"""The chart's RBAC, rule by rule: exactly what the operator's calls need, nothing else.

Why it exists: RBAC that grows one "just in case" verb at a time ends up able to read Secrets. These
tests pin the exact rules per mode (cluster-wide, namespaced, with peering) so any widening is a
deliberate, reviewed change; the e2e tests prove the same rules are enough for the real flow.
"""

from __future__ import annotations

from typing import Any

from kopf._cogs.structs import references

from ascend_operator.api.constants import GROUP, PLURAL
from tests.helm.chart import Helm, one, pick

NAMESPACED_RULES: list[dict[str, Any]] = [
    {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get", "list", "watch", "create", "patch", "delete"]},
    {"apiGroups": [GROUP], "resources": [f"{PLURAL}/status"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch", "create", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "watch", "create", "patch"]},
    {
        "apiGroups": ["networking.k8s.io"],
        "resources": ["networkpolicies"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
    SECRETS_RULE := {
        "apiGroups": [""],
        "resources": ["secrets"],
        "resourceNames": ["ascend-engine-api-key"],
        "verbs": ["get"],
    },
    {
        "apiGroups": ["policy"],
        "resources": ["poddisruptionbudgets"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "list"]},
    #: controller/autoscaling.py: an HPA that scales a service with spec.autoscaling too is named, not fought.
    {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"], "verbs": ["list"]},
    #: controller/revisions.py: the service's earlier specs, for rollbacks and `aisctl rollout`.
    {"apiGroups": ["apps"], "resources": ["controllerrevisions"], "verbs": ["list", "create", "delete"]},
]
CRD_RULE = {
    "apiGroups": ["apiextensions.k8s.io"],
    "resources": ["customresourcedefinitions"],
    "verbs": ["list", "watch"],
}
NAMESPACES_RULE = {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]}
#: controller/routing.py: read, create, replace the spec of (JSON patch) and delete owned InferencePools.
POOL_RULE = {
    "apiGroups": ["inference.networking.k8s.io"],
    "resources": ["inferencepools"],
    "verbs": ["get", "create", "patch", "delete"],
}
FULLNAME = "ais-ascend-inference-operator"


def peering_rules(plural: str, name: str) -> list[dict[str, Any]]:
    return [
        {"apiGroups": ["kopf.dev"], "resources": [plural], "verbs": ["list", "watch"]},
        {"apiGroups": ["kopf.dev"], "resources": [plural], "resourceNames": [name], "verbs": ["patch"]},
    ]


def _subjects(binding: dict[str, Any]) -> list[dict[str, Any]]:
    subjects: list[dict[str, Any]] = binding["subjects"]
    return subjects


def test_cluster_wide_by_default_exact_rules(helm: Helm) -> None:
    objects = helm.template()
    assert one(objects, "ClusterRole")["rules"] == [CRD_RULE, *NAMESPACED_RULES]
    binding = one(objects, "ClusterRoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": FULLNAME}
    assert _subjects(binding) == [{"kind": "ServiceAccount", "name": FULLNAME, "namespace": "ascend-system"}]
    assert not pick(objects, "Role")
    assert not pick(objects, "RoleBinding")


def test_namespaced_mode_roles_per_namespace_and_two_cluster_reads(helm: Helm) -> None:
    objects = helm.template(sets=["operator.watchNamespaces={team-a,team-b}"])
    assert one(objects, "ClusterRole")["rules"] == [CRD_RULE, NAMESPACES_RULE]
    roles = {r["metadata"]["namespace"]: r["rules"] for r in pick(objects, "Role")}
    assert roles == {"team-a": NAMESPACED_RULES, "team-b": NAMESPACED_RULES}
    bindings = {b["metadata"]["namespace"]: b for b in pick(objects, "RoleBinding")}
    assert set(bindings) == {"team-a", "team-b"}
    for binding in bindings.values():
        assert binding["roleRef"]["kind"] == "Role"
        assert _subjects(binding) == [{"kind": "ServiceAccount", "name": FULLNAME, "namespace": "ascend-system"}]


def test_peering_rules_only_with_replicas_and_only_on_its_own_object(helm: Helm) -> None:
    clusterwide = helm.template(sets=["replicaCount=2"])
    assert one(clusterwide, "ClusterRole")["rules"] == [
        CRD_RULE,
        *NAMESPACED_RULES,
        *peering_rules("clusterkopfpeerings", FULLNAME),
    ]
    namespaced = helm.template(sets=["replicaCount=3", "operator.watchNamespaces={llm}", "operator.peeringName=p"])
    assert one(namespaced, "Role")["rules"] == [*NAMESPACED_RULES, *peering_rules("kopfpeerings", "p")]
    assert one(namespaced, "ClusterRole")["rules"] == [CRD_RULE, NAMESPACES_RULE]


def test_peering_objects_match_the_resources_kopf_looks_for(helm: Helm) -> None:
    objects = helm.template(sets=["replicaCount=2"])
    peering = one(objects, "ClusterKopfPeering")
    assert peering["metadata"]["name"] == FULLNAME
    assert references.CLUSTER_PEERINGS_K.group == peering["apiVersion"].split("/")[0]
    assert references.CLUSTER_PEERINGS_K.any_name == "clusterkopfpeerings"
    args = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--peering={FULLNAME}" in args
    assert "--peering-priority=random" in args  # equal priorities would pause every replica
    assert one(objects, "Deployment")["spec"]["strategy"]["type"] == "RollingUpdate"
    namespaced = helm.template(sets=["replicaCount=2", "operator.watchNamespaces={a,b}"])
    kopf_peerings = pick(namespaced, "KopfPeering")
    assert sorted(p["metadata"]["namespace"] for p in kopf_peerings) == ["a", "b"]
    assert {p["apiVersion"] for p in kopf_peerings} == {f"{references.NAMESPACED_PEERINGS_K.group}/v1"}
    assert not pick(namespaced, "ClusterKopfPeering")


def test_inference_pool_rule_only_with_routing_enabled(helm: Helm) -> None:
    assert POOL_RULE not in one(helm.template(), "ClusterRole")["rules"]
    routed = helm.template(sets=["routing.inferencePool.enabled=true"])
    assert one(routed, "ClusterRole")["rules"] == [CRD_RULE, *NAMESPACED_RULES, POOL_RULE]
    namespaced = helm.template(sets=["routing.inferencePool.enabled=true", "operator.watchNamespaces={a,b}"])
    assert {r["metadata"]["namespace"]: r["rules"] for r in pick(namespaced, "Role")} == {
        "a": [*NAMESPACED_RULES, POOL_RULE],
        "b": [*NAMESPACED_RULES, POOL_RULE],
    }
    assert one(namespaced, "ClusterRole")["rules"] == [CRD_RULE, NAMESPACES_RULE]


def test_no_rule_reaches_configmaps_wildcards_or_updates_and_secrets_only_by_name(helm: Helm) -> None:
    for sets in (
        [],
        ["replicaCount=2"],
        ["operator.watchNamespaces={a}", "replicaCount=2"],
        ["multiNode.enabled=true"],
        ["routing.inferencePool.enabled=true"],
    ):
        objects = helm.template(sets=sets)
        for role in pick(objects, "ClusterRole") + pick(objects, "Role"):
            for rule in role["rules"]:
                assert "*" not in rule["apiGroups"] + rule["resources"] + rule["verbs"], rule
                assert not {"configmaps", "nodes"} & set(rule["resources"]), rule
                assert not {"update", "deletecollection", "escalate", "bind", "impersonate"} & set(rule["verbs"])
                assert "delete" not in rule["verbs"] or rule["resources"] in (
                    ["pods"],
                    ["leaderworkersets"],
                    ["inferencepools"],
                    ["networkpolicies"],
                    ["poddisruptionbudgets"],
                    ["ascendinferenceservices"],  # a disaggregated service's role services
                    ["controllerrevisions"],  # revisions beyond spec.rollout.revisionHistoryLimit
                ), rule
                if "secrets" in rule["resources"]:  # never list/watch: only a Secret whose name it was given
                    assert rule == SECRETS_RULE, rule


LWS_RULE = {
    "apiGroups": ["leaderworkerset.x-k8s.io"],
    "resources": ["leaderworkersets"],
    "verbs": ["get", "create", "patch", "delete"],
}


def test_leaderworkerset_rules_only_when_multi_node_is_enabled(helm: Helm) -> None:
    assert one(helm.template(sets=["multiNode.enabled=true"]), "ClusterRole")["rules"] == [
        CRD_RULE, *NAMESPACED_RULES, LWS_RULE
    ]  # fmt: skip
    objects = helm.template(sets=["multiNode.enabled=true", "operator.watchNamespaces={team-a}"])
    assert one(objects, "Role")["rules"] == [*NAMESPACED_RULES, LWS_RULE]


def test_secret_rule_follows_the_names_or_any_name_or_goes(helm: Helm) -> None:
    def secret_rules(sets: list[str]) -> list[dict[str, Any]]:
        role = one(helm.template(sets=sets), "ClusterRole")
        return [r for r in role["rules"] if r["resources"] == ["secrets"]]

    named = secret_rules(["rbac.apiKeySecrets.names={key-a,key-b}"])
    assert named == [{**SECRETS_RULE, "resourceNames": ["key-a", "key-b"]}]
    anyname = secret_rules(["rbac.apiKeySecrets.anyName=true"])
    assert anyname == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    assert secret_rules(["rbac.apiKeySecrets.names=null"]) == []


def test_rbac_and_service_account_can_be_left_to_the_user(helm: Helm) -> None:
    objects = helm.template(sets=["rbac.create=false", "serviceAccount.create=false", "serviceAccount.name=mine"])
    assert not {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount"} & {
        o["kind"] for o in objects
    }
    assert one(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "mine"


def test_every_rule_is_commented_in_the_template() -> None:
    from tests.helm.chart import CHART

    lines = (CHART / "templates" / "rbac.yaml").read_text().splitlines()
    rule_starts = [i for i, line in enumerate(lines) if line.strip().startswith("- apiGroups:")]
    assert len(rule_starts) >= 10
    for i in rule_starts:
        assert lines[i - 1].strip().startswith("#"), f"rule at rbac.yaml line {i + 1} has no comment above it"


#: What the watch caches need (clients/caches.py): list and watch of each cached kind.
CACHE_NEEDS: dict[str, tuple[str, str]] = {
    "pods": ("", "pods"),
    "services": ("", "services"),
    "poddisruptionbudgets": ("policy", "poddisruptionbudgets"),
    "networkpolicies": ("networking.k8s.io", "networkpolicies"),
}


def test_every_watch_cache_is_granted_list_and_watch_by_the_chart(helm: Helm) -> None:
    from kubernetes import client

    from ascend_operator.clients.caches import Caches

    for namespaces in ((), ("team-a",)):
        kinds = {resource for _, resource, *_ in Caches(client.ApiClient(), namespaces=namespaces).specs}
        assert kinds == set(CACHE_NEEDS), "a watch cache without its RBAC row (or a row for a cache that is gone)"
    sets = [[], ["operator.watchNamespaces={team-a}"]]
    for extra in sets:
        objects = helm.template(sets=extra)
        rules = [r for o in objects if o["kind"] in ("ClusterRole", "Role") for r in o["rules"]]
        granted = {
            (g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
        }
        missing = {
            f"{verb} {resource}.{group or 'core'} ({extra or 'cluster-wide'})"
            for group, resource in CACHE_NEEDS.values()
            for verb in ("list", "watch")
            if (group, resource, verb) not in granted
        }
        assert not missing


def test_every_kubernetes_call_the_operator_makes_is_granted_by_the_chart(helm: Helm) -> None:
    """Every verb of clients/resources.py's table (the client refuses a verb its row lacks, so the table is
    every call the operator can make) is granted by the chart with every feature on: a missing verb is a
    403 only a cluster with the chart's ServiceAccount shows, long after the unit tests pass."""
    from ascend_operator.clients.resources import RESOURCES

    needs = {grant: res.kind for res in RESOURCES for grant in res.grants()}
    assert len(needs) >= 20, "the table lost its rows"
    everything = [
        "router.enabled=true",
        "multiNode.enabled=true",
        "routing.inferencePool.enabled=true",
        "rbac.apiKeySecrets.names={ascend-engine-api-key}",
    ]
    rules = one(helm.template(sets=everything), "ClusterRole")["rules"]
    granted = {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    missing = sorted(
        f"{kind}: {verb} {resource}.{group or 'core'}"
        for (group, resource, verb), kind in needs.items()
        if (group, resource, verb) not in granted
    )
    assert not missing


def test_npu_fault_reads_are_granted_only_with_the_feature_and_only_where_the_reports_live(helm: Helm) -> None:
    """`npuFaults.enabled`: list/watch of ConfigMaps in the plugin's and NodeD's namespaces, read-only, and the
    operator's --npu-faults; off, the chart grants nothing of it (issue 30, least privilege)."""
    from ascend_operator.clients.chip_reports import NAMESPACES

    def npu_roles(objects: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        return {
            o["metadata"]["namespace"]: o["rules"]
            for o in objects
            if o["kind"] == "Role" and "npu" in o["metadata"]["name"]
        }

    def args(objects: list[dict[str, Any]]) -> list[str]:
        return list(one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"])

    off = helm.template(sets=[])
    assert npu_roles(off) == {}
    assert "--npu-faults" not in args(off)
    assert not [
        r for o in off if o["kind"] in ("Role", "ClusterRole") for r in o["rules"] if "configmaps" in r["resources"]
    ]
    on = helm.template(sets=["npuFaults.enabled=true"])
    read_only = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]}]
    assert npu_roles(on) == dict.fromkeys(NAMESPACES, read_only)
    assert "--npu-faults" in args(on)
    bindings = {o["metadata"]["namespace"] for o in on if o["kind"] == "RoleBinding" and "npu" in o["metadata"]["name"]}
    assert bindings == set(NAMESPACES)
    # the nodes' device-plugin labels, for spec.runtime.minDriverVersion and chipName: read-only, cluster-wide
    node_roles = [o for o in on if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-npu-nodes")]
    assert [r["rules"] for r in node_roles] == [
        [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]}]
    ]
    assert not [o for o in off if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-npu-nodes")]
