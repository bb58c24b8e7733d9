"""The chart's RBAC, rule by rule: exactly what the operator's calls need, nothing else.

Why it exists: RBAC that grows one "just in case" verb at a time ends up able to read Secrets. These
tests pin the exact rules per mode (cluster-wide, namespaced, with peering) so any widening is a
deliberate, reviewed change; the e2e tests prove the same rules are enough for the real flow.
"""

from __future__ import annotations

from typing import Any

from kopf._cogs.structs import references

from tests.helm.chart import Helm, one, pick

SECRETS_RULE: dict[str, Any] = {
    "apiGroups": [""],
    "resources": ["secrets"],
    "resourceNames": ["ascend-engine-api-key"],
    "verbs": ["get"],
}


def table_rules(*gates: str) -> list[dict[str, Any]]:
    """The rules the table of kinds (clients/resources.py) asks for with these chart values on, in the
    table's order, then the Secrets rule (the chart writes it from its values): what every Role or
    ClusterRole of the operator's namespaced rules must hold, exactly."""
    from ascend_operator.clients.rbac import granted

    return [*granted(*gates), SECRETS_RULE]


NAMESPACED_RULES = table_rules()
CRD_RULE = {
    "apiGroups": ["apiextensions.k8s.io"],
    "resources": ["customresourcedefinitions"],
    "verbs": ["list", "watch"],
}
NAMESPACES_RULE = {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]}
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
    assert one(objects, "ClusterRole", FULLNAME)["rules"] == [CRD_RULE, *NAMESPACED_RULES]
    binding = one(objects, "ClusterRoleBinding", FULLNAME)
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": FULLNAME}
    assert _subjects(binding) == [{"kind": "ServiceAccount", "name": FULLNAME, "namespace": "ascend-system"}]
    # the only namespaced grant by default: node loss's read of kubelet Leases in kube-node-lease
    assert [(r["metadata"]["namespace"], r["metadata"]["name"]) for r in pick(objects, "Role")] == [
        ("kube-node-lease", f"{FULLNAME}-node-loss")
    ]
    assert [r["metadata"]["name"] for r in pick(objects, "RoleBinding")] == [f"{FULLNAME}-node-loss"]


def test_namespaced_mode_roles_per_namespace_and_two_cluster_reads(helm: Helm) -> None:
    objects = helm.template(sets=["operator.watchNamespaces={team-a,team-b}"])
    assert one(objects, "ClusterRole", FULLNAME)["rules"] == [CRD_RULE, NAMESPACES_RULE]
    roles = {r["metadata"]["namespace"]: r["rules"] for r in pick(objects, "Role", FULLNAME)}
    assert roles == {"team-a": NAMESPACED_RULES, "team-b": NAMESPACED_RULES}
    bindings = {b["metadata"]["namespace"]: b for b in pick(objects, "RoleBinding", FULLNAME)}
    assert set(bindings) == {"team-a", "team-b"}
    for binding in bindings.values():
        assert binding["roleRef"]["kind"] == "Role"
        assert _subjects(binding) == [{"kind": "ServiceAccount", "name": FULLNAME, "namespace": "ascend-system"}]


def test_peering_rules_only_with_replicas_and_only_on_its_own_object(helm: Helm) -> None:
    clusterwide = helm.template(sets=["replicaCount=2"])
    assert one(clusterwide, "ClusterRole", FULLNAME)["rules"] == [
        CRD_RULE,
        *NAMESPACED_RULES,
        *peering_rules("clusterkopfpeerings", FULLNAME),
    ]
    namespaced = helm.template(sets=["replicaCount=3", "operator.watchNamespaces={llm}", "operator.peeringName=p"])
    assert one(namespaced, "Role", FULLNAME)["rules"] == [*NAMESPACED_RULES, *peering_rules("kopfpeerings", "p")]
    assert one(namespaced, "ClusterRole", FULLNAME)["rules"] == [CRD_RULE, NAMESPACES_RULE]


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
    pools = [r for r in table_rules("routing.inferencePool.enabled") if r["resources"] == ["inferencepools"]]
    assert pools == [
        {"apiGroups": ["inference.networking.k8s.io"], "resources": ["inferencepools"],
         "verbs": ["get", "create", "patch", "delete"]}
    ]  # fmt: skip
    assert pools[0] not in one(helm.template(), "ClusterRole", FULLNAME)["rules"]
    routed = helm.template(sets=["routing.inferencePool.enabled=true"])
    expected = table_rules("routing.inferencePool.enabled")
    assert one(routed, "ClusterRole", FULLNAME)["rules"] == [CRD_RULE, *expected]
    namespaced = helm.template(sets=["routing.inferencePool.enabled=true", "operator.watchNamespaces={a,b}"])
    assert {r["metadata"]["namespace"]: r["rules"] for r in pick(namespaced, "Role", FULLNAME)} == {
        "a": expected,
        "b": expected,
    }
    assert one(namespaced, "ClusterRole", FULLNAME)["rules"] == [CRD_RULE, NAMESPACES_RULE]


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
                if not role["metadata"]["name"].endswith("-node-loss"):  # its own test: nodes, Leases, read-only
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
                    ["controllerrevisions"],  # revisions beyond spec.rollout.revisionHistoryLimit
                ), rule
                if "secrets" in rule["resources"]:  # never list/watch: only a Secret whose name it was given
                    assert rule == SECRETS_RULE, rule


def test_leaderworkerset_and_router_rules_only_with_their_chart_values(helm: Helm) -> None:
    for value in ("multiNode.enabled", "router.enabled"):
        on = table_rules(value)
        assert len(on) > len(NAMESPACED_RULES), f"{value} gates no rule of the table"
        assert one(helm.template(sets=[f"{value}=true"]), "ClusterRole", FULLNAME)["rules"] == [CRD_RULE, *on]
        objects = helm.template(sets=[f"{value}=true", "operator.watchNamespaces={team-a}"])
        assert one(objects, "Role", FULLNAME)["rules"] == on
    lws = {"apiGroups": ["leaderworkerset.x-k8s.io"], "resources": ["leaderworkersets"],
           "verbs": ["get", "create", "patch", "delete"]}  # fmt: skip
    assert lws in table_rules("multiNode.enabled")
    assert lws not in NAMESPACED_RULES
    delete_services = {"apiGroups": [""], "resources": ["services"], "verbs": ["delete"]}
    assert delete_services in table_rules("router.enabled")
    assert delete_services not in NAMESPACED_RULES


def test_the_generated_rules_are_what_the_table_says() -> None:
    """`make crd` writes templates/_owned-rules.tpl from the table: a row changed without it fails here."""
    from ascend_operator.clients.rbac import owned_rules, with_readme_table
    from tests.helm.chart import CHART

    assert (CHART / "templates" / "_owned-rules.tpl").read_text() == owned_rules(), "run `make crd`"
    readme = (CHART / "README.md").read_text()
    assert with_readme_table(readme) == readme, "the chart README's table of rules drifted: run `make crd`"


def test_secret_rule_follows_the_names_or_any_name_or_goes(helm: Helm) -> None:
    def secret_rules(sets: list[str]) -> list[dict[str, Any]]:
        role = one(helm.template(sets=sets), "ClusterRole", FULLNAME)
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

    for name, least in (("rbac.yaml", 5), ("_owned-rules.tpl", 14)):
        lines = (CHART / "templates" / name).read_text().splitlines()
        rule_starts = [i for i, line in enumerate(lines) if line.strip().startswith("- apiGroups:")]
        assert len(rule_starts) >= least
        for i in rule_starts:
            assert lines[i - 1].strip().startswith("#"), f"rule at {name} line {i + 1} has no comment above it"


def test_every_watch_cache_is_granted_list_and_watch_by_the_chart(helm: Helm) -> None:
    from kubernetes import client

    from ascend_operator.clients.caches import Caches
    from ascend_operator.clients.resources import CACHED

    needs = {(res.group, res.plural) for res in CACHED}
    assert {("", "pods"), ("", "services")} <= needs, "the table lost its cached rows"
    for namespaces in ((), ("team-a",)):
        kinds = {(res.group, res.plural) for res, *_ in Caches(client.ApiClient(), namespaces=namespaces).specs}
        assert kinds == needs, "a watch cache of a kind not marked cached in the table"
    sets = [[], ["operator.watchNamespaces={team-a}"]]
    for extra in sets:
        objects = helm.template(sets=extra)
        rules = [r for o in objects if o["kind"] in ("ClusterRole", "Role") for r in o["rules"]]
        granted = {
            (g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
        }
        missing = {
            f"{verb} {resource}.{group or 'core'} ({extra or 'cluster-wide'})"
            for group, resource in needs
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
    rules = one(helm.template(sets=everything), "ClusterRole", FULLNAME)["rules"]
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


def test_node_loss_reads_are_granted_only_with_the_feature_nodes_and_node_leases_read_only(helm: Helm) -> None:
    """`nodeLoss.enabled` (on by default: a replica lost with its node is worse than a read-only grant):
    list/watch of the nodes and of the Leases in kube-node-lease (clients/nodes.py), and the operator's
    --node-loss; off, nothing of it."""
    from ascend_operator.clients.nodes import LEASE_NAMESPACE

    def args(objects: list[dict[str, Any]]) -> list[str]:
        return list(one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"])

    def mine(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
        return [o for o in objects if o["kind"] == kind and o["metadata"]["name"].endswith("-node-loss")]

    assert "--node-loss" in args(helm.template(sets=[]))
    off = helm.template(sets=["nodeLoss.enabled=false"])
    assert "--node-loss" not in args(off)
    assert not [o for kind in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding") for o in mine(off, kind)]
    on = helm.template(sets=["nodeLoss.enabled=true"])
    assert "--node-loss" in args(on)
    assert [r["rules"] for r in mine(on, "ClusterRole")] == [
        [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]}]
    ]
    assert [(r["metadata"]["namespace"], r["rules"]) for r in mine(on, "Role")] == [
        (LEASE_NAMESPACE, [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["list", "watch"]}])
    ]
    bindings = mine(on, "RoleBinding") + mine(on, "ClusterRoleBinding")
    assert sorted(b["roleRef"]["kind"] for b in bindings) == ["ClusterRole", "Role"]
    assert all(b["subjects"][0]["name"] == FULLNAME for b in bindings)
    assert helm.template(sets=["nodeLoss.enabled=true", "rbac.create=false"]) != on  # RBAC left to the user
    assert not mine(helm.template(sets=["nodeLoss.enabled=true", "rbac.create=false"]), "ClusterRole")
