"""How a replica's NPUs are split, and the engine's environment entries: here, not in spec.py, because
spec.disaggregation's pools (api/disaggregation.py) take the same models and spec.py imports that module.
"""

from pydantic import Field

from ascend_operator.api.base import ApiModel

ENV_NAME = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"

#: vllm-ascend docs/source/tutorials/models/DeepSeek-R1.md (v0.25.1rc1) section 5.2 uses 13389 on both nodes.
DEFAULT_DP_RPC_PORT = 13389


class Parallelism(ApiModel):
    """How a replica's NPUs are split: `data` engines of `tensor` NPUs each, over `nodes` pods.

    Multi-node follows vllm-ascend's multi-node data-parallel tutorial (DeepSeek-R1.md section 5.2): DP is
    the total across nodes, each node runs `data / nodes` engines; TP never spans nodes.
    """

    tensor: int = Field(default=8, ge=1, le=16, description="TP: NPUs one engine shards the model over.")
    data: int = Field(
        default=1,
        ge=1,
        le=64,
        description="DP: engines of one replica, summed over its nodes; each node runs "
        "`data / nodes` of them (`--data-parallel-size-local`).",
    )
    expert: bool = Field(default=True, description="Expert parallelism (EP = TP x DP) for MoE layers.")
    nodes: int = Field(
        default=1,
        ge=1,
        le=8,
        description="Nodes (pods) one replica spans, each with `spec.npus` NPUs. 1 renders plain pods; more "
        "renders one LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) whose leader serves the API and whose "
        "workers run `--headless`.",
    )
    rpc_port: int = Field(
        default=DEFAULT_DP_RPC_PORT,
        ge=1024,
        le=65535,
        description="`--data-parallel-rpc-port` on every node of a multi-node replica (unused when nodes = 1).",
    )
    network_interface: str = Field(
        default="eth0",
        pattern=r"^[A-Za-z0-9][-._A-Za-z0-9]{0,14}$",
        description="Interface carrying the pod IP on a multi-node replica: GLOO_SOCKET_IFNAME, "
        "TP_SOCKET_IFNAME and HCCL_SOCKET_IFNAME (HCCL_IF_IP is the pod IP). eth0 is the pod interface of "
        "common CNIs; set the node's NIC for hostNetwork pods.",
    )


class EnvVar(ApiModel):
    """An environment variable; overrides the profile's default of the same name."""

    name: str = Field(pattern=ENV_NAME, description="Variable name.")
    value: str = Field(default="", description="Value (an empty string is a value).")
