"""What makes a pod the leader or a worker of a multi-node engine group: its extra args and network env.

Pure, and only additive: a single-node pod (role None) gets exactly the args and env it always had. The
form is vllm-ascend's multi-node data-parallel tutorial, docs/source/tutorials/models/DeepSeek-R1.md at
v0.25.1rc1, section 5.2 "Multi-Node Data Parallel Deployment" (lines 222-325): both nodes run `vllm serve`
with the same model flags plus `--data-parallel-size` (total), `--data-parallel-size-local`,
`--data-parallel-address` (node 0's IP) and `--data-parallel-rpc-port`; node 1 adds `--headless` and
`--data-parallel-start-rank`. vLLM 0.25.1 vllm/engine/arg_utils.py:1031-1066 declares those flags
(aliases -dp, -dpr, -dpl, -dpa, -dpp); vllm/entrypoints/cli/serve.py:173-191 runs `--headless` engines
without an API server.
"""

from enum import StrEnum
from typing import Any

from ascend_operator.api.spec import AscendInferenceServiceSpec

#: LeaderWorkerSet's pod webhook injects these into every container of a group's pods
#: (sigs.k8s.io/lws v0.7.0 api/leaderworkerset/v1/leaderworkerset_types.go:66-74,
#: pkg/utils/pod/pod_utils.go:130-150); Kubernetes expands `$(NAME)` in args from the container env.
LEADER_ADDRESS_ENV = "LWS_LEADER_ADDRESS"
WORKER_INDEX_ENV = "LWS_WORKER_INDEX"

#: The tutorial's network variables (DeepSeek-R1.md lines 238-241 and 284-287): HCCL_IF_IP is the node's
#: own IP, the three *_SOCKET_IFNAME the interface that carries it.
SOCKET_IFNAME_ENV = ("GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME")
HCCL_IF_IP_ENV = "HCCL_IF_IP"


class Role(StrEnum):
    """A pod's place in a multi-node group."""

    LEADER = "leader"
    """Node 0: serves the OpenAI API and hosts the data-parallel coordinator."""
    WORKER = "worker"
    """Nodes 1..n-1: `--headless` engines that join the leader's data-parallel group."""


def local_data_parallel(spec: AscendInferenceServiceSpec) -> int:
    """`--data-parallel-size-local`: the engines each node runs."""
    return spec.parallelism.data // spec.parallelism.nodes


def worker_start_rank(spec: AscendInferenceServiceSpec) -> str:
    """`--data-parallel-start-rank` of a worker: its LWS worker index times the engines per node.

    One worker template serves every worker, and a container arg cannot compute, so the value is a
    constant for two nodes (the tutorial's case: start rank = engines per node) and `$(LWS_WORKER_INDEX)`
    for one engine per node; the rule `MultiNodeStartRank` rejects every other layout.
    """
    local = local_data_parallel(spec)
    if spec.parallelism.nodes == 2:
        return str(local)
    return f"$({WORKER_INDEX_ENV})"


def group_args(spec: AscendInferenceServiceSpec, role: Role) -> list[str]:
    """The data-parallel flags that follow `--data-parallel-size` on a group's pods."""
    args = [
        "--data-parallel-size-local", str(local_data_parallel(spec)),
        "--data-parallel-address", f"$({LEADER_ADDRESS_ENV})",
        "--data-parallel-rpc-port", str(spec.parallelism.rpc_port),
    ]  # fmt: skip
    if role is Role.WORKER:
        args += ["--data-parallel-start-rank", worker_start_rank(spec)]
    return args


def with_role(args: list[str], spec: AscendInferenceServiceSpec, role: Role | None) -> list[str]:
    """A single-node argument list turned into the leader's or a worker's; unchanged for role None."""
    if role is None:
        return args
    out = list(args)
    at = out.index("--data-parallel-size") + 2
    out[at:at] = group_args(spec, role)
    if role is Role.WORKER:
        # the tutorial puts --headless right after --host/--port (DeepSeek-R1.md line 299)
        port = out.index("--port") + 2
        out.insert(port, "--headless")
    return out


def group_env(spec: AscendInferenceServiceSpec, env: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tutorial's network env after the pod's env; a name the spec sets itself is left to the spec."""
    named = {var.name for var in spec.env}
    extra: list[dict[str, Any]] = []
    if HCCL_IF_IP_ENV not in named:
        # the pod's own IP: with one pod per node it is the address the node's HCCL traffic leaves from
        extra.append({"name": HCCL_IF_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    nic = spec.parallelism.network_interface
    extra += [{"name": name, "value": nic} for name in SOCKET_IFNAME_ENV if name not in named]
    return [*env, *extra]
