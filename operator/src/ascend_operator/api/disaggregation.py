"""Prefill/decode disaggregation: one service split into a prefill pool and a decode pool that move the KV
cache with vllm-ascend's Mooncake connector, behind the service's vllm-router in P/D mode.

Why two child services instead of two kinds of pod in one: a role is a whole service of its own (its pods,
canary, stall and drift detectors, config check, disruption budget and rolls), so every rule that protects an
aggregated service protects each role with no role-aware code in the loops, and a roll never leaves a role
empty because each role has its own budget. The parent (`spec.disaggregation`) owns the two children
(`<name>-prefill`, `<name>-decode`, each with `spec.pdRole`) and the router; `kubectl scale` on the parent
scales both roles and keeps the P:D ratio (Kthena's "one replicas field and a ratio").

The connector's keys are vllm-ascend v0.25.1rc1's (docs/router.md "P/D contract" has every citation):
`MooncakeConnectorV1` (vllm_ascend/distributed/kv_transfer/__init__.py:29-31), `kv_role` kv_producer on
prefill and kv_consumer on decode (kv_p2p/mooncake_connector.py:2374-2411), both sides' `tp_size`/`dp_size`
under `kv_connector_extra_config` (asserts, :2012-2026), the handshake base `kv_port` (:1974-1982).
"""

from enum import StrEnum

from pydantic import Field

from ascend_operator.api.base import ApiModel
from ascend_operator.api.engine import EngineSpec
from ascend_operator.api.layout import EnvVar, Parallelism
from ascend_operator.api.router import RouterPolicy

#: The tutorial's handshake base (pd_disaggregation_mooncake_multi_node.md:510-524).
DEFAULT_KV_PORT = 36000
#: Mooncake's AscendDirectTransport takes random ports in [20000, 20000 + NPUs per node x 1000): on an
#: 8-NPU Atlas 800 A2 the handshake ports must start at 28000 or above (tutorial :219-230).
MIN_KV_PORT = 28000
#: AscendDirectTransport's random ports: [20000, 20000 + NPUs per node x 1000) (tutorial :219-230).
TRANSPORT_PORT_BASE = 20000
TRANSPORT_PORTS_PER_NPU = 1000
#: vLLM envs.py:1661-1662: prefill KV no decode pulled is force-freed after this many seconds.
DEFAULT_ABORT_SECONDS = 480


class KvConnector(StrEnum):
    """The connector's registered name (kv_transfer/__init__.py:29-31). An enum, not a Literal: a Literal
    becomes `const` in the schema, which a CRD's structural schema does not declare."""

    MOONCAKE = "MooncakeConnectorV1"


class PdRole(StrEnum):
    """Which side of the KV transfer a member service is."""

    PREFILL = "prefill"
    DECODE = "decode"


class KvRole(StrEnum):
    """`kv_role` of vLLM's KVTransferConfig: the prefill engine produces KV, the decode engine consumes it."""

    PRODUCER = "kv_producer"
    CONSUMER = "kv_consumer"


class KvLoadFailurePolicy(StrEnum):
    """`kv_load_failure_policy` of vLLM 0.25.1's KVTransferConfig (vllm/config/kv_transfer.py:69-72): what a
    decode engine does with a request whose KV could not be loaded."""

    RECOMPUTE = "recompute"
    FAIL = "fail"


class SideParallelism(ApiModel):
    """One side's layout as the connector needs it (`kv_connector_extra_config.prefill|decode`)."""

    tp_size: int = Field(ge=1, le=16, description="That side's --tensor-parallel-size.")
    dp_size: int = Field(ge=1, le=64, description="That side's --data-parallel-size.")


class ConnectorExtra(ApiModel):
    """`kv_connector_extra_config`: required on both sides (mooncake_connector.py:2012-2026)."""

    prefill: SideParallelism = Field(description="The prefill engines' layout.")
    decode: SideParallelism = Field(description="The decode engines' layout.")


class KvTransferConfig(ApiModel):
    """vLLM's `--kv-transfer-config` for vllm-ascend's Mooncake connector, rendered as compact JSON with
    these keys in snake_case (vLLM's own names, config/kv_transfer.py)."""

    kv_connector: KvConnector = Field(
        default=KvConnector.MOONCAKE, description="The connector (vllm-ascend's registered name)."
    )
    kv_role: KvRole = Field(description="kv_producer on prefill engines, kv_consumer on decode engines.")
    kv_port: int = Field(
        default=DEFAULT_KV_PORT,
        ge=MIN_KV_PORT,
        le=65000,
        description="Base of the connector's handshake ports: an engine listens on kv_port + its DP rank x TP + "
        "its NPU index (mooncake_connector.py:1974-1982). At least 28000 on an 8-NPU node: Mooncake's "
        "AscendDirectTransport takes random ports below that (tutorial :219-230).",
    )
    kv_connector_extra_config: ConnectorExtra = Field(description="Both sides' tp_size and dp_size.")
    kv_load_failure_policy: KvLoadFailurePolicy | None = Field(
        default=None, description="vLLM's kv_load_failure_policy (config/kv_transfer.py:69); unset: vLLM's fail."
    )


class PdRoleSpec(ApiModel):
    """Set by the operator on the two services `spec.disaggregation` creates: this service is one role of a
    disaggregated service. Editing it by hand is undone by the parent's next pass."""

    group: str = Field(
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        max_length=53,
        description="The disaggregated (parent) service: its router routes to this one, and its two roles' pods "
        "may reach one another on every port (the KV handshake and transfer ports).",
    )
    role: PdRole = Field(description="prefill or decode.")
    kv_transfer: KvTransferConfig = Field(
        description="The KV connector between the roles (vllm-ascend's Mooncake connector)."
    )
    abort_seconds: int = Field(
        default=DEFAULT_ABORT_SECONDS,
        ge=1,
        le=86_400,
        description="VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT: how long a prefill engine keeps KV that no decode "
        "engine pulled (vLLM envs.py:1661-1662, default 480).",
    )


class PoolSpec(ApiModel):
    """One role's engines: how many per unit, their layout and engine settings."""

    replicas: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Engine replicas of this role per unit: the role runs spec.replicas x this many.",
    )
    parallelism: Parallelism | None = Field(
        default=None,
        description="The role's layout (`nodes` must be 1). Unset: spec.parallelism. Prefill TP must be at least "
        "decode TP (mooncake_connector.py:1926-1930) and a multiple of it (ascend_config.py:187-194).",
    )
    engine: EngineSpec | None = Field(
        default=None,
        description="The role's engine settings, replacing spec.engine as a whole (a prefill pool typically "
        "wants a larger maxNumBatchedTokens, a decode pool more maxNumSeqs). Unset: spec.engine.",
    )
    env: list[EnvVar] = Field(default_factory=list, description="Environment added to spec.env (same name: this one).")
    router_policy: RouterPolicy | None = Field(
        default=None,
        description="How the router picks an engine of this pool: vllm-router 0.1.17's `--prefill-policy` / "
        "`--decode-policy` (router_args.py:176-204, P/D mode only). Unset: spec.router.policy.",
    )


class DisaggregationSpec(ApiModel):
    """A prefill pool and a decode pool moving KV with Mooncake, behind spec.router in P/D mode."""

    prefill: PoolSpec = Field(default_factory=PoolSpec, description="The prefill engines.")
    decode: PoolSpec = Field(default_factory=PoolSpec, description="The decode engines.")
    kv_port: int = Field(
        default=DEFAULT_KV_PORT,
        ge=MIN_KV_PORT,
        le=65000,
        description="The connector's `kv_port` on both roles: at least 20000 + 1000 x NPUs per node, above "
        "Mooncake AscendDirectTransport's random ports (tutorial :219-230: 28000 on an 8-NPU node, 36000 on a "
        "16-NPU node; a pod of 16 NPUs is refused below 36000).",
    )
    kv_load_failure_policy: KvLoadFailurePolicy | None = Field(
        default=None,
        description="What a decode engine does with a request whose KV could not be loaded from the prefill "
        "engine (vLLM's kv_transfer_config `kv_load_failure_policy`, vllm/config/kv_transfer.py:69-72): "
        "`fail` ends it with an error (the client gets a 500), `recompute` computes the prompt on the decode "
        "engine instead. Unset: vLLM's default, fail.",
    )
    abort_seconds: int = Field(
        default=DEFAULT_ABORT_SECONDS,
        ge=1,
        le=86_400,
        description="VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT on the prefill engines (vLLM default 480).",
    )
