"""NPU faults on the local control plane: the operator reads the Ascend device plugin's own reports and rolls
the pod on a failed chip, and its successor lands where the chip is not.

The reports are written here the way the plugin writes them (health/chips.py cites the MindCluster lines):
ConfigMap kube-system/mindx-dl-deviceinfo-<node>, labelled mx-consumer-cim=true, its DeviceInfoCfg JSON
with the faulty chip in `huawei.com/Ascend910-Fault`; the pod's `huawei.com/AscendReal` annotation; and the
node's allocatable dropping by the faulty chip (the plugin reports it Unhealthy to the kubelet). KWOK has
no device plugin, so the test plays the plugin's part; everything the operator does is real. NodeD's
part likewise: its ConfigMap mindx-dl/mindx-dl-nodeinfo-<node>, labelled mx-consumer-cim=true, NodeInfo JSON
as noded/pkg/reporter/cmreporter/configmap_reporter.go:68-73,104-125 writes it (and deletes it when the node
is healthy).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from ascend_operator.contract.mindcluster import check_code
from harness.cluster import Cluster, wait_for
from harness.product import chip_fault, write_plugin_report
from tests.e2e.operator_fixtures import (
    FAST,
    MODEL,
    AddNodes,
    Proc,
    ais,
    attach,  # noqa: F401 (a fixture)
    completion,
    example,
    gate,
    label_nodes,
    pods,
    start_operator,
)
from tests.e2e.passes import free_port, metric_values, more_passes

CHIPS = ",".join(f"Ascend910-{i}" for i in range(8))
NODEINFO_EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "mindcluster" / "nodeinfo-docs-example.json"


@pytest.fixture
def npu_operator(cluster: Cluster, crd: None, tmp_path: Path) -> Iterator[tuple[Proc, int]]:
    """The operator with --npu-faults, and its metrics port. The reports a test writes go with it: the next
    test's nodes take the same names, and a report left behind would speak for them."""
    cluster.kubectl("create", "namespace", "mindx-dl", check=False)
    clear_reports(cluster)
    port = free_port()
    proc = start_operator(cluster, tmp_path / "operator.log", "--npu-faults", "--metrics-port", str(port))
    yield proc, port
    proc.stop()
    clear_reports(cluster)


def clear_reports(cluster: Cluster) -> None:
    """Delete the device plugin's and NodeD's ConfigMaps (what the operator watches: label mx-consumer-cim)."""
    for ns in ("kube-system", "mindx-dl"):
        cluster.kubectl("delete", "configmap", "-n", ns, "-l", "mx-consumer-cim=true", "--ignore-not-found")


def live(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    return [p for p in pods(cluster, namespace, "svc") if not p["metadata"].get("deletionTimestamp")]


def volcano_held(cluster: Cluster, node: str) -> set[str]:
    """The chips the plugin counts in use, as it reads them (device/ascendcommon.go:1160-1174 npuIsUsedNow):
    those named by a pod's `huawei.com/Ascend910` annotation on the node, which only Volcano's scheduler
    writes (ascend-for-volcano internal/npu/base/task.go:77), never the plugin itself; of the pods not Failed
    or Succeeded, a terminating one included (kubeclient/kube_cache.go:222-244 getActivePodListCache)."""
    listed = cluster.kubectl("get", "pods", "-A", "--field-selector", f"spec.nodeName={node}", "-o", "json")
    return {
        chip
        for pod in json.loads(listed)["items"]
        if (pod.get("status") or {}).get("phase") not in ("Failed", "Succeeded")
        for chip in ((pod["metadata"].get("annotations") or {}).get("huawei.com/Ascend910") or "").split(",")
        if chip
    }


def plugin_report(cluster: Cluster, node: str, faults: list[dict[str, Any]], *, free: str = "") -> None:
    """What the device plugin writes for `node` (ascend910.go:664-676; proto.go:36-42, 222-236). A chip at
    PreSeparateNPU stays off the Unhealthy list only while Volcano's annotation on a pod names it
    (device/ascendcommon.go:1144-1148 isHealthy); every other faulty chip is Unhealthy."""
    held = volcano_held(cluster, node)
    unhealthy = [
        f["npu_name"] for f in faults if not (f["fault_handling"] == "PreSeparateNPU" and f["npu_name"] in held)
    ]
    write_plugin_report(cluster, node, faults, unhealthy=unhealthy, free=free)


def noded_report(cluster: Cluster, node: str, status: str, faults: list[dict[str, Any]]) -> None:
    """What NodeD writes for `node` when it has faults (noded/pkg/common/type.go:50-79: NodeInfoCM, FaultDev;
    configmap_reporter.go:104-125: namespace mindx-dl, label mx-consumer-cim=true, data NodeInfo and
    updateTime). The example in the MindCluster docs: tests/fixtures/mindcluster/nodeinfo-docs-example.json."""
    node_info = {"FaultDevList": faults, "NodeStatus": status}
    info = {"NodeInfo": node_info, "CheckCode": check_code(node_info)}
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"mindx-dl-nodeinfo-{node}", "labels": {"mx-consumer-cim": "true"}},
        "data": {"NodeInfo": json.dumps(info), "updateTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
    }
    cluster.apply(body, namespace="mindx-dl")


def npu_dev_fault(device_id: int, code: str = "2C000031") -> dict[str, Any]:
    """One NPU in NodeD's FaultDevList: IPMI device type 0x56 is "NPU" (noded/pkg/common/common.go:57);
    2C000031 is the SeparateFaultCodes entry of noded/build/NodeDConfiguration.json. The same fields as the
    docs' example entry (checked, so the two cannot drift apart)."""
    fault = {"DeviceType": "NPU", "DeviceId": device_id, "FaultCode": [code], "FaultLevel": "SeparateFault"}
    example = json.loads(json.loads(NODEINFO_EXAMPLE.read_text())["NodeInfo"])["NodeInfo"]["FaultDevList"][0]
    assert {k: type(v) for k, v in fault.items()} == {k: type(v) for k, v in example.items()}
    return fault


def node_unhealthy_series(port: int) -> dict[str, float]:
    """The operator's ascend_operator_node_unhealthy samples, by node."""
    return metric_values(f"http://127.0.0.1:{port}/metrics", "ascend_operator_node_unhealthy", "node")


def mount_chips(cluster: Cluster, namespace: str, pod: dict[str, Any], *, volcano: bool = False) -> None:
    """The plugin's annotation of the chips it mounted (ascendcommon.go:989-1003); with `volcano`, also the
    annotation Volcano's scheduler writes on the pods it places (ascend-for-volcano base/task.go:77)."""
    name = pod["metadata"]["name"]
    cluster.kubectl("annotate", "pod", name, "-n", namespace, f"huawei.com/AscendReal={CHIPS}", "--overwrite")
    if volcano:
        cluster.kubectl("annotate", "pod", name, "-n", namespace, f"huawei.com/Ascend910={CHIPS}", "--overwrite")


def drop_chip(cluster: Cluster, node: str, left: int) -> None:
    """The plugin reports the chip Unhealthy to the kubelet: the node's allocatable NPUs drop."""
    patch = {"status": {"allocatable": {"huawei.com/Ascend910": str(left)}}}
    cluster.kubectl("patch", "node", node, "--subresource=status", "--type=merge", "-p", json.dumps(patch))


def roll_of(cluster: Cluster, namespace: str, pod: dict[str, Any], *, what: str) -> dict[str, Any]:
    """The service's roll record of `pod`, once the operator has written it (status.rolls)."""
    uid = pod["metadata"]["uid"]

    def record() -> dict[str, Any] | None:
        rolls = (ais(cluster, namespace, "svc").get("status") or {}).get("rolls") or []
        return next((r for r in rolls if r["uid"] == uid), None)

    found: dict[str, Any] = wait_for(record, timeout=60, message=what)
    return found


def serving(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, attach: Callable[..., Proc], *, nodes: int, **spec: Any
) -> list[str]:
    """`nodes` fresh nodes for this test, the simulator attached, and service svc (the example with `spec`)
    applied and waited for until every replica's gate reads True/CanaryPassing; the node names."""
    names = add_nodes(nodes)
    label_nodes(cluster, names, namespace)
    attach()
    cluster.apply(example("svc", node_label=namespace, **spec), namespace=namespace)
    replicas = int(spec.get("replicas", 1))
    wait_for(lambda: [gate(p) for p in live(cluster, namespace)] == ["True/CanaryPassing"] * replicas, timeout=150,
             message=f"{replicas} replica(s) Ready")  # fmt: skip
    return names


def test_a_chip_fault_rolls_its_pod_naming_the_chip_and_the_successor_lands_on_another_node(
    cluster: Cluster,
    namespace: str,
    add_nodes: AddNodes,
    npu_operator: tuple[Proc, int],
    attach: Callable[..., Proc],
) -> None:
    serving(cluster, namespace, add_nodes, attach, nodes=2, health=FAST)
    first = live(cluster, namespace)[0]
    node = first["spec"]["nodeName"]
    mount_chips(cluster, namespace, first)

    # a RestartRequest of 20 s: MindCluster itself waits 60 s before acting; so does the operator
    plugin_report(cluster, node, [chip_fault("Ascend910-3", "RestartRequest", "80C98000", age=20)])
    more_passes(npu_operator[1], health=5, reconcile=0)
    assert [p["metadata"]["uid"] for p in live(cluster, namespace)] == [first["metadata"]["uid"]]
    assert not (ais(cluster, namespace, "svc").get("status") or {}).get("rolls")

    t_fault = time.monotonic()
    drop_chip(cluster, node, 7)
    plugin_report(cluster, node, [chip_fault("Ascend910-4", "SeparateNPU", "A8028801,80E18402")])
    roll = roll_of(cluster, namespace, first, what="the pod on the failed chip rolled")
    t_roll = time.monotonic()
    assert roll["reason"] == "NPUFault"
    assert f"chip Ascend910-4 on node {node}: fault at level SeparateNPU (codes A8028801, 80E18402)" in roll["message"]
    assert roll["drain"] == "NotDrained"
    successor = wait_for(
        lambda: next((p for p in live(cluster, namespace) if p["metadata"]["uid"] != first["metadata"]["uid"]
                      and p["spec"].get("nodeName")), None),
        timeout=90,
        message="a successor placed",
    )  # fmt: skip
    assert successor["spec"]["nodeName"] != node, "the successor landed on the node whose chip failed"
    # rolled once: the report stays (the chip is still separated), the node has no pod left to roll
    more_passes(npu_operator[1], health=5, reconcile=2)
    rolls = [r for r in ais(cluster, namespace, "svc")["status"]["rolls"] if r["reason"] == "NPUFault"]
    assert len(rolls) == 1
    print(f"\n[npu] SeparateNPU report -> roll record: {t_roll - t_fault:.1f}s")


def test_a_node_noded_reports_unhealthy_rolls_its_pod_once_and_its_successor_waits_for_another_node(
    cluster: Cluster,
    namespace: str,
    add_nodes: AddNodes,
    npu_operator: tuple[Proc, int],
    attach: Callable[..., Proc],
) -> None:
    """NodeD calls the pod's node UnHealthy (all 8 NPUs in its FaultDevList at SeparateFault) while the device
    plugin's own report of the node stays healthy and its chips stay allocatable: the NodeD report alone rolls
    the pod, as NodeUnhealthy naming the node, once (issue 30: one cause, not a roll per chip or per pass);
    the successor waits for capacity elsewhere rather than landing on the node MindCluster isolates, and is
    placed on a node that comes."""
    [node] = serving(cluster, namespace, add_nodes, attach, nodes=1, health=FAST)
    first = live(cluster, namespace)[0]
    mount_chips(cluster, namespace, first)
    plugin_report(cluster, node, [])  # the plugin sees nothing wrong; its free list is empty (all 8 serve)

    t_fault = time.monotonic()
    noded_report(cluster, node, "UnHealthy", [npu_dev_fault(i) for i in range(8)])
    roll = roll_of(cluster, namespace, first, what="the pod on the node NodeD reports UnHealthy rolled")
    t_roll = time.monotonic()
    print(f"\n[npu] NodeD UnHealthy report -> roll record: {t_roll - t_fault:.1f}s")
    assert roll["reason"] == "NodeUnhealthy"
    assert f"NodeD reports node {node} UnHealthy" in roll["message"]
    assert roll["drain"] == "NotDrained"
    assert node_unhealthy_series(npu_operator[1]).get(node) == 1.0

    # the node's 8 NPUs are free again once the pod is gone; nothing but the operator keeps the successor off
    more_passes(npu_operator[1], health=10, reconcile=3)
    placed = [(p["metadata"]["name"], p["spec"].get("nodeName")) for p in live(cluster, namespace)]
    assert all(on != node for _, on in placed), f"a successor was placed on the node NodeD reports UnHealthy: {placed}"
    rolls = [r for r in ais(cluster, namespace, "svc")["status"]["rolls"] if r["reason"] == "NodeUnhealthy"]
    assert len(rolls) == 1, rolls
    ready = next(c for c in ais(cluster, namespace, "svc")["status"]["conditions"] if c["type"] == "Ready")
    assert (
        f"kept off node(s) {node} (NodeD reports node {node} UnHealthy): waiting for free NPUs" in (ready["message"])
    ), ready

    [other] = add_nodes(1)
    label_nodes(cluster, [other], namespace)
    successor = wait_for(
        lambda: next((p for p in live(cluster, namespace) if p["spec"].get("nodeName")), None),
        timeout=90,
        message="a successor placed on the node that came",
    )
    assert successor["spec"]["nodeName"] == other


def test_eight_chips_failing_at_once_are_one_node_cause_and_one_roll(
    cluster: Cluster,
    namespace: str,
    add_nodes: AddNodes,
    npu_operator: tuple[Proc, int],
    attach: Callable[..., Proc],
) -> None:
    """All 8 chips of one node reported at SeparateNPU in one write (a board or HCCS ring failure): one cause,
    NodeUnhealthy naming the node, one roll, not eight NPUFault rolls; the replica on the healthy node keeps
    serving untouched, and the successor, kept off the failed node, waits for capacity with a message saying
    so (the only other node is full) while no further deletion happens."""
    serving(cluster, namespace, add_nodes, attach, nodes=2, replicas=2, health=FAST)
    before = live(cluster, namespace)
    for pod in before:
        mount_chips(cluster, namespace, pod)
    failed = before[0]["spec"]["nodeName"]
    healthy = next(p for p in before if p["spec"]["nodeName"] != failed)

    t_fault = time.monotonic()
    drop_chip(cluster, failed, 0)
    plugin_report(cluster, failed, [chip_fault(f"Ascend910-{i}", "SeparateNPU", "80E18402") for i in range(8)])
    wait_for(lambda: (ais(cluster, namespace, "svc").get("status") or {}).get("rolls"), timeout=60,
             message="a roll")  # fmt: skip
    t_roll = time.monotonic()
    print(f"\n[npu] 8 chips SeparateNPU at once -> roll record: {t_roll - t_fault:.1f}s")
    more_passes(npu_operator[1], health=10, reconcile=3)
    status = ais(cluster, namespace, "svc")["status"]
    (roll,) = status["rolls"]
    assert roll["reason"] == "NodeUnhealthy"
    assert f"8 of 8 chips of node {failed} are faulty" in roll["message"]
    assert roll["uid"] == before[0]["metadata"]["uid"]
    now = live(cluster, namespace)
    assert healthy["metadata"]["uid"] in [p["metadata"]["uid"] for p in now]
    assert gate(next(p for p in now if p["metadata"]["uid"] == healthy["metadata"]["uid"])) == "True/CanaryPassing"
    assert all(p["spec"].get("nodeName") != failed for p in now), "a successor was placed on the failed node"
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert f"kept off node(s) {failed} (8 of 8 chips of node {failed} are faulty" in ready["message"], ready


def test_no_noded_report_and_no_free_chip_is_a_healthy_node(
    cluster: Cluster,
    namespace: str,
    add_nodes: AddNodes,
    npu_operator: tuple[Proc, int],
    attach: Callable[..., Proc],
) -> None:
    """NodeD deletes its ConfigMap when the node is healthy (configmap_reporter.go:68-73), and the plugin's
    `huawei.com/Ascend910` lists free chips only (ascendcommon.go:657-661): a node whose 8 chips all serve the
    engine and of which NodeD says nothing rolls nothing. The operator is seen reading NodeD's ConfigMaps
    meanwhile: the other node's UnHealthy report shows in its metric."""
    nodes = serving(cluster, namespace, add_nodes, attach, nodes=2, health=FAST)
    first = live(cluster, namespace)[0]
    node = first["spec"]["nodeName"]
    other = next(n for n in nodes if n != node)
    mount_chips(cluster, namespace, first)
    psu_fault = {"DeviceType": "PSU", "DeviceId": 4, "FaultCode": ["0300000D"], "FaultLevel": "NotHandleFault"}
    plugin_report(cluster, node, [], free="")
    # a fault NodeD does not act on (a PSU at NotHandleFault, as in the MindCluster docs' example at
    # common_operations.md:1605) leaves the node Healthy; once it clears NodeD deletes the ConfigMap
    noded_report(cluster, node, "Healthy", [psu_fault])
    cluster.kubectl("delete", "configmap", f"mindx-dl-nodeinfo-{node}", "-n", "mindx-dl")
    noded_report(cluster, other, "UnHealthy", [npu_dev_fault(i) for i in range(8)])
    wait_for(lambda: node_unhealthy_series(npu_operator[1]).get(other) == 1.0, timeout=30,
             message="the operator reads NodeD's report of the other node")  # fmt: skip

    more_passes(npu_operator[1], health=5, reconcile=2)
    assert [p["metadata"]["uid"] for p in live(cluster, namespace)] == [first["metadata"]["uid"]]
    assert [gate(p) for p in live(cluster, namespace)] == ["True/CanaryPassing"]
    assert not (ais(cluster, namespace, "svc").get("status") or {}).get("rolls")
    assert node not in node_unhealthy_series(npu_operator[1])


def test_an_engine_lands_only_on_a_node_whose_driver_meets_the_minimum_and_says_when_none_does(
    cluster: Cluster,
    namespace: str,
    add_nodes: AddNodes,
    npu_operator: tuple[Proc, int],
    attach: Callable[..., Proc],
) -> None:
    """spec.runtime.minDriverVersion over the plugin's `huawei.com/driver.version` labels: the older node never
    gets the pod although it is free; with no node new enough the pod stays Pending and the status says why."""
    old, new = add_nodes(2)
    label_nodes(cluster, [old, new], namespace)
    cluster.kubectl("label", "node", old, "huawei.com/driver.version=23.0.6", "--overwrite")
    cluster.kubectl("label", "node", new, "huawei.com/driver.version=25.5.1", "--overwrite")
    attach()
    runtime = {"minDriverVersion": "24.1.rc2"}
    cluster.apply(example("svc", node_label=namespace, health=FAST, runtime=runtime), namespace=namespace)
    pod = wait_for(lambda: next((p for p in live(cluster, namespace) if p["spec"].get("nodeName")), None),
                   timeout=90, message="the pod placed")  # fmt: skip
    assert pod["spec"]["nodeName"] == new
    cluster.kubectl("patch", "ais", "svc", "-n", namespace, "--type=merge", "-p",
                    json.dumps({"spec": {"runtime": {"minDriverVersion": "26.0.0"}}}))  # fmt: skip

    def explained() -> str | None:
        conds = (ais(cluster, namespace, "svc").get("status") or {}).get("conditions") or []
        ready = next((c for c in conds if c["type"] == "Ready"), None)
        message = str((ready or {}).get("message") or "")
        return message if "no node meets the placement requirements" in message else None

    message = wait_for(explained, timeout=150, message="the status names the requirement no node meets")
    assert "huawei.com/driver.version >= 26.0.0" in message
    assert "25.5.1" in message
    assert "23.0.6" in message


@pytest.mark.parametrize("volcano", [False, True], ids=["without Volcano", "with Volcano"])
def test_a_pre_separated_chip_drains_its_pod_and_the_request_in_flight_completes(
    cluster: Cluster,
    namespace: str,
    add_nodes: AddNodes,
    npu_operator: tuple[Proc, int],
    attach: Callable[..., Proc],
    volcano: bool,
) -> None:
    """PreSeparateNPU: the chip keeps working for the pod using it, so the pod goes like a planned roll: out
    of the Service, its requests finish, then deleted (not the short grace of a hung pod), and the successor
    lands where the chip is not. Without Volcano (MindCluster's documented setup) the plugin reports the chip
    Unhealthy to the kubelet at once, so the node's allocatable drops at the fault; with Volcano it keeps the
    chip Healthy for the annotated pod and drops it only once the pod is gone, which is why the operator then
    keeps new engines off the node meanwhile."""
    # at real engine speed (time scale 1): the drain waits on a request that lasts as long as it would on NPUs
    serving(cluster, namespace, add_nodes, partial(attach, AIS_SIM_TIME_SCALE="1"), nodes=3, replicas=2,
            health=FAST, rollout={"drainSeconds": 300})  # fmt: skip
    target = next(p for p in live(cluster, namespace) if p["metadata"]["name"] == "svc-0")
    node, url = target["spec"]["nodeName"], f"http://{target['status']['podIP']}:8000"
    mount_chips(cluster, namespace, target, volcano=volcano)
    inflight: dict[str, Any] = {}
    body = {"model": MODEL, "prompt": "long", "sim_prompt_tokens": 256, "max_tokens": 1000, "ignore_eos": True}
    thread = completion(url, body, inflight)
    wait_for(lambda: metric_values(f"{url}/metrics", "vllm:num_requests_running").get("", 0) >= 1, timeout=30,
             message="the request runs")  # fmt: skip

    t_fault = time.monotonic()
    plugin_report(cluster, node, [chip_fault("Ascend910-2", "PreSeparateNPU", "81078603")])
    if not volcano:
        drop_chip(cluster, node, 7)  # Unhealthy to the kubelet at once (ascendcommon.go:1148)
    uid = target["metadata"]["uid"]
    wait_for(lambda: [gate(p) for p in live(cluster, namespace) if p["metadata"]["uid"] == uid] == ["False/Draining"],
             timeout=60, message="svc-0 drains")  # fmt: skip
    t_drain = time.monotonic()
    assert thread.is_alive(), "the request ended before the drain began: nothing shows it was waited for"
    thread.join(timeout=300)
    assert inflight["status"] == 200
    assert inflight["body"]["usage"]["completion_tokens"] == 1000
    roll = wait_for(
        lambda: next((r for r in ais(cluster, namespace, "svc")["status"].get("rolls") or []
                      if r["uid"] == uid), None),
        timeout=60,
        message="the drained pod rolled",
    )  # fmt: skip
    t_roll = time.monotonic()
    assert (roll["reason"], roll["drain"]) == ("NPUPreSeparate", "Completed")
    assert f"chip Ascend910-2 on node {node}: fault at level PreSeparateNPU (codes 81078603)" in roll["message"]
    # the chip is free now: the plugin (with Volcano, now) separates it, the node has 7 chips for an 8-chip engine
    plugin_report(cluster, node, [chip_fault("Ascend910-2", "PreSeparateNPU", "81078603")])
    drop_chip(cluster, node, 7)
    successor = wait_for(
        lambda: next((p for p in live(cluster, namespace) if p["metadata"]["name"] == "svc-0"
                      and p["metadata"]["uid"] != uid and p["spec"].get("nodeName")), None),
        timeout=90,
        message="a successor placed",
    )  # fmt: skip
    assert successor["spec"]["nodeName"] != node
    rolls = ais(cluster, namespace, "svc")["status"]["rolls"]
    assert [r["reason"] for r in rolls] == ["NPUPreSeparate"], rolls
    print(f"\n[npu] PreSeparateNPU ({'with' if volcano else 'without'} Volcano) report -> drain: "
          f"{t_drain - t_fault:.1f}s, -> roll record: {t_roll - t_fault:.1f}s")  # fmt: skip


def test_a_node_noded_calls_preseparate_takes_no_new_engine_and_keeps_the_one_it_has(
    cluster: Cluster,
    namespace: str,
    add_nodes: AddNodes,
    npu_operator: tuple[Proc, int],
    attach: Callable[..., Proc],
) -> None:
    """NodeD's PreSeparate is a sub-healthy node (noded control/faultcontrol/fault.go:181-193): MindCluster's
    scheduler places nothing new there (ascend-for-volcano internal/rescheduling/reschedule.go:860-863) and
    its pods run on. The replica on such a node is not rolled; a new replica is created kept off both
    nodes by name and stays Pending while the only free node is PreSeparate."""
    nodes = serving(cluster, namespace, add_nodes, attach, nodes=2, health=FAST)
    first = live(cluster, namespace)[0]
    busy = first["spec"]["nodeName"]
    spare = next(n for n in nodes if n != busy)
    mount_chips(cluster, namespace, first)
    plugin_report(cluster, busy, [])
    fault = {"DeviceType": "CPU", "DeviceId": 1, "FaultCode": ["00000011"], "FaultLevel": "PreSeparateFault"}
    for node in nodes:
        noded_report(cluster, node, "PreSeparate", [fault])
    more_passes(npu_operator[1], health=2, reconcile=2)  # the operator has read both reports
    cluster.kubectl("patch", "ais", "svc", "-n", namespace, "--type=merge", "-p", '{"spec":{"replicas":2}}')

    def fence(pod: dict[str, Any]) -> list[str]:
        """The node names the pod's required node affinity excludes (render/fitness.py with_fitness)."""
        node = (pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}
        terms = (node.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
        return [v for t in terms for f in t.get("matchFields") or [] if f["operator"] == "NotIn" for v in f["values"]]

    def second() -> dict[str, Any] | None:
        return next((p for p in live(cluster, namespace) if p["metadata"]["uid"] != first["metadata"]["uid"]), None)

    # with two nodes kept off, the API server refused the pod while the fence was one NotIn of two values
    new = wait_for(second, timeout=60, message="the second replica created")
    assert sorted(fence(new)) == sorted(nodes), new["spec"].get("affinity")
    more_passes(npu_operator[1], health=5, reconcile=2)
    placed = [p["spec"].get("nodeName") for p in live(cluster, namespace)]
    assert spare not in placed, f"a new engine was placed on the node NodeD calls PreSeparate: {placed}"
    assert not (ais(cluster, namespace, "svc").get("status") or {}).get("rolls")
    kept = next(p for p in live(cluster, namespace) if p["metadata"]["uid"] == first["metadata"]["uid"])
    assert gate(kept) == "True/CanaryPassing"
