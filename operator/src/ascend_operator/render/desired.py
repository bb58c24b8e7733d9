"""Every object the operator makes for one service, built in one place: the reconcile pass applies these and
`aisctl render` prints them, both walking the rows of controller/steps.py.

Why one place: render and the operator had grown two paths. `aisctl render` printed the engine pods, the
Service, the NetworkPolicy and the budget, while the operator also made the router's Deployment, its
ServiceAccount, Role, RoleBinding, Service and budget, and for a P/D split the two role services (not the
aggregated pod render printed). Now both ask `Desired` for each piece, so what render prints is what the
operator creates, by construction; tests/e2e/test_render_matches.py compares the two on a cluster. Which
piece a pass applies when, and in which order render prints them, is the steps' table, not this module's.

What the cluster adds is an input (`Placement`): the device plugin's resource name, the operator's own
pods, the API key's Secret version, the driver versions that meet spec.runtime, the nodes MindCluster took
out. Render passes the defaults; the operator what it read this pass.

A disaggregated service's engines are its roles': it owns two role services (render/disaggregation.py) and no engine
of its own, and each role service is then reconciled like any other; `role_desired` gives what each
becomes, so render (controller/steps.py `rendered`) shows the role services and their objects.
"""

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ascend_operator.api.constants import NPU_RESOURCE
from ascend_operator.api.disaggregation import PdRole
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.render.disaggregation import ROLES, build_role_service, role_name, role_selector, role_spec
from ascend_operator.render.group_pdb import build_group_pdb
from ascend_operator.render.inferencepool import build_inference_pool
from ascend_operator.render.lws import build_leader_worker_set, is_multi_node
from ascend_operator.render.netpol import OperatorPeer, build_network_policy
from ascend_operator.render.pod import Owner, build_pdb, build_pod, build_service, serving_selector
from ascend_operator.render.router import RouterTarget, build_router_objects
from ascend_operator.render.scheduling import queue_annotations, scheduling_fields


@dataclass(frozen=True, kw_only=True)
class Placement:
    """What the cluster adds to a spec when the operator builds its objects (render: the defaults)."""

    npu_resource: str = NPU_RESOURCE
    """The device plugin's NPU resource name (`aisctl operator --npu-resource`)."""
    operator: OperatorPeer = field(default_factory=OperatorPeer)
    """The operator's own pods, admitted by every NetworkPolicy."""
    key_version: str | None = None
    """The API key Secret's resourceVersion (a rotation replaces the engines: render/pod.py spec_hash)."""
    driver_versions: tuple[str, ...] | None = None
    """The cluster's driver versions that meet spec.runtime.minDriverVersion; None: not read."""
    avoid_nodes: tuple[str, ...] = ()
    """Nodes MindCluster took out whole: new engine pods keep off them."""


def router_target(spec: AscendInferenceServiceSpec, owner: Owner) -> RouterTarget:
    """What the router routes to: this service's serving engine pods and their slots (a P/D split's: the
    decode engines hold the slots, and the P/D path sends the API key). An autoscaled service's slots are
    those of spec.autoscaling.maxReplicas, so a scale step leaves the router's Deployment as it is."""
    if spec.disaggregation is not None:
        decode = role_spec(spec, PdRole.DECODE, group=owner.name)
        return RouterTarget(
            owner=owner,
            engine_port=decode.engine.port,
            engine_selector=role_selector(owner.name, PdRole.DECODE),
            # autoscaled: the decode pool's most, so no scale step changes the router's arguments
            engine_replicas=decode.replicas if decode.autoscaling is None else decode.autoscaling.max_replicas,
            max_num_seqs=decode.engine.max_num_seqs,
            data_parallel=decode.parallelism.data,
            api_key=spec.auth.api_key_secret_ref,
            disaggregated=(role_selector(owner.name, PdRole.PREFILL), role_selector(owner.name, PdRole.DECODE)),
            pool_policies=(spec.disaggregation.prefill.router_policy, spec.disaggregation.decode.router_policy),
            pod_scheduling=scheduling_fields(spec),
            pod_annotations=queue_annotations(spec),
        )
    return RouterTarget(
        owner=owner,
        engine_port=spec.engine.port,
        engine_selector=serving_selector(spec, owner),
        # with spec.autoscaling, the most replicas it may ask: a limit that follows spec.replicas would
        # change the router's arguments, so roll every router pod, at each scale step (docs/router.md)
        engine_replicas=spec.autoscaling.max_replicas if spec.autoscaling is not None else spec.replicas,
        max_num_seqs=spec.engine.max_num_seqs,
        data_parallel=spec.parallelism.data,
        pod_scheduling=scheduling_fields(spec),
        pod_annotations=queue_annotations(spec),
    )


def why_no_revisions(spec: AscendInferenceServiceSpec) -> str | None:
    """Why a service keeps no revisions of its own (no ControllerRevisions, no judged rollout), or None: the
    one rule the reconcile pass (controller/rollout.py) and `aisctl rollout status` both apply."""
    if is_multi_node(spec):
        return "a multi-node service: its LeaderWorkerSet rolls the groups"
    if spec.disaggregation is not None:
        return "a P/D parent: its prefill and decode services have revisions of their own"
    return None


@dataclass(frozen=True, kw_only=True)
class Desired:
    """The objects of one service as the spec asks for them; each piece is built once, on first use."""

    spec: AscendInferenceServiceSpec
    owner: Owner
    placement: Placement = field(default_factory=Placement)

    @cached_property
    def engines(self) -> AscendInferenceServiceSpec:
        """The part of the spec the service's own engine pods serve: none of a P/D split (its roles serve;
        pods left from an aggregated spec are scaled away through the budget, as any scale-down)."""
        if self.spec.disaggregation is None:
            return self.spec
        return self.spec.model_copy(update={"replicas": 0})

    @property
    def multi_node(self) -> bool:
        return is_multi_node(self.engines)

    def pod(self, replica: int) -> dict[str, Any]:
        """The engine pod of one replica (single-node specs; indices need not be 0..replicas-1 after a
        scale-down: controller/plan.py)."""
        p = self.placement
        return build_pod(
            self.engines,
            owner=self.owner,
            replica=replica,
            npu_resource=p.npu_resource,
            key_version=p.key_version,
            driver_versions=p.driver_versions,
            avoid_nodes=p.avoid_nodes,
        )

    def pods(self) -> list[dict[str, Any]]:
        """The pods of replicas 0..replicas-1, as a fresh service gets them (none for a multi-node spec)."""
        return [] if self.multi_node else [self.pod(i) for i in range(self.engines.replicas)]

    def groups(self) -> dict[str, Any] | None:
        """The LeaderWorkerSet of a multi-node spec (the reconcile pass sets its replicas to what
        controller/groups.py plans while single-node pods make way), else None."""
        if not self.multi_node:
            return None
        return build_leader_worker_set(
            self.engines,
            owner=self.owner,
            npu_resource=self.placement.npu_resource,
            driver_versions=self.placement.driver_versions,
        )

    @cached_property
    def service(self) -> dict[str, Any]:
        """The Service over the serving engine pods."""
        return build_service(self.engines, owner=self.owner)

    @cached_property
    def budget(self) -> dict[str, Any] | None:
        """The engines' PodDisruptionBudget, counted in groups for a multi-node spec (one name for both)."""
        if self.multi_node:
            return build_group_pdb(self.engines, owner=self.owner)
        return build_pdb(self.engines, owner=self.owner)

    @cached_property
    def network_policy(self) -> dict[str, Any] | None:
        """The engines' NetworkPolicy, or None when spec.networkPolicy is off."""
        return build_network_policy(self.spec, owner=self.owner, operator=self.placement.operator)

    @cached_property
    def inference_pool(self) -> dict[str, Any] | None:
        """The InferencePool, with spec.routing.inferencePool."""
        if not self.spec.routing.inference_pool.enabled:
            return None
        return build_inference_pool(self.spec, owner=self.owner)

    @cached_property
    def router_target(self) -> RouterTarget:
        return router_target(self.spec, self.owner)

    @cached_property
    def router(self) -> tuple[dict[str, Any], ...]:
        """spec.router's objects in creation order (identity and rights before the pods that use them)."""
        if self.spec.router is None:
            return ()
        return tuple(build_router_objects(self.spec.router, self.router_target))

    @cached_property
    def roles(self) -> tuple[dict[str, Any], ...]:
        """A P/D split's two role services (AscendInferenceServices the parent owns)."""
        if self.spec.disaggregation is None:
            return ()
        return tuple(build_role_service(self.spec, role, owner=self.owner) for role in ROLES)

    def role_desired(self) -> Iterator["Desired"]:
        """What each role service becomes when the operator reconciles it (none without a P/D split)."""
        if self.spec.disaggregation is None:
            return
        for role in ROLES:
            owner = Owner(name=role_name(self.owner.name, role), namespace=self.owner.namespace)
            yield Desired(spec=role_spec(self.spec, role, group=self.owner.name), owner=owner, placement=self.placement)
