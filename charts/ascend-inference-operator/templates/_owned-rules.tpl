{{- /*
GENERATED from operator/src/ascend_operator/clients/resources.py by `make crd` (clients/rbac.py): do not
edit. One rule per kind the operator touches, its comment the row's `why`, gated by the row's chart value.
rbac.yaml includes it in every Role or ClusterRole of the operator's namespaced rules.
*/ -}}
{{- define "ais.ownedRules" }}
  # The custom resource: kopf lists and watches it (one reconcile and one health daemon per service);
  # patched for the finalizer, progress annotations and status; a disaggregated service's two role
  # services are created, patched and deleted (controller/disaggregation.py).
  - apiGroups: ["inference.ascend.dev"]
    resources: ["ascendinferenceservices"]
    verbs: ["get", "list", "watch", "create", "patch", "delete"]
  # AscendInferenceService status (the status subresource).
  - apiGroups: ["inference.ascend.dev"]
    resources: ["ascendinferenceservices/status"]
    verbs: ["patch"]
  # Engine pods: created for missing replicas, patched with the drain start and drift-baseline
  # annotations a restarted operator reads back, deleted (uid precondition) for stale specs and rolls;
  # their status carries the readiness gate inference.ascend.dev/engine-ready (controller/monitor.py).
  - apiGroups: [""]
    resources: ["pods"]
    verbs: ["list", "watch", "create", "patch", "delete"]
  # Pod status (the status subresource).
  - apiGroups: [""]
    resources: ["pods/status"]
    verbs: ["patch"]
  # The Service in front of a service's engines (and its router's); a router's Service is deleted when
  # spec.router goes (the engines' Service never is).
  - apiGroups: [""]
    resources: ["services"]
    verbs: ["get", "list", "watch", "create", "patch"]
  {{- if .Values.router.enabled }}
  # Service delete: only with router.enabled.
  - apiGroups: [""]
    resources: ["services"]
    verbs: ["delete"]
  {{- end }}
  # The NetworkPolicy in front of each service's engines; deleted when spec.networkPolicy is turned off.
  - apiGroups: ["networking.k8s.io"]
    resources: ["networkpolicies"]
    verbs: ["get", "list", "watch", "create", "patch", "delete"]
  # The PodDisruptionBudget of a service's engine pods (minAvailable); deleted when
  # spec.disruptionBudget.enabled is turned off (only one the service owns).
  - apiGroups: ["policy"]
    resources: ["poddisruptionbudgets"]
    verbs: ["get", "list", "watch", "create", "patch", "delete"]
  # Events on AscendInferenceServices: kopf posts core v1 events (kopf/_cogs/clients/events.py); list:
  # the FailedMount events of a pod stuck before its containers (the pod status does not say why).
  - apiGroups: [""]
    resources: ["events"]
    verbs: ["list", "create"]
  # An HPA that scales a service with spec.autoscaling too is named, never fought
  # (controller/autoscaling.py).
  - apiGroups: ["autoscaling"]
    resources: ["horizontalpodautoscalers"]
    verbs: ["list"]
  # A service's engine specs, one ControllerRevision each (controller/revisions.py): listed for
  # rollbacks and `aisctl rollout`, created on a spec change, pruned beyond
  # spec.rollout.revisionHistoryLimit.
  - apiGroups: ["apps"]
    resources: ["controllerrevisions"]
    verbs: ["list", "create", "delete"]
  {{- if .Values.router.enabled }}
  # A service's router Deployment (spec.router, controller/owned.py).
  - apiGroups: ["apps"]
    resources: ["deployments"]
    verbs: ["get", "create", "patch", "delete"]
  {{- end }}
  {{- if .Values.router.enabled }}
  # The router pods' identity (render/router.py).
  - apiGroups: [""]
    resources: ["serviceaccounts"]
    verbs: ["get", "create", "delete"]
  {{- end }}
  {{- if .Values.router.enabled }}
  # The router's discovery rights: list and watch on pods (the operator holds both, so it may grant
  # them).
  - apiGroups: ["rbac.authorization.k8s.io"]
    resources: ["roles"]
    verbs: ["get", "create", "patch", "delete"]
  {{- end }}
  {{- if .Values.router.enabled }}
  # The binding of the router's Role to its ServiceAccount.
  - apiGroups: ["rbac.authorization.k8s.io"]
    resources: ["rolebindings"]
    verbs: ["get", "create", "patch", "delete"]
  {{- end }}
  {{- if .Values.multiNode.enabled }}
  # Multi-node services (spec.parallelism.nodes > 1) are one LeaderWorkerSet each (render/lws.py);
  # deleted when the service goes back to one node.
  - apiGroups: ["leaderworkerset.x-k8s.io"]
    resources: ["leaderworkersets"]
    verbs: ["get", "create", "patch", "delete"]
  {{- end }}
  {{- if .Values.routing.inferencePool.enabled }}
  # InferencePools of services with spec.routing.inferencePool (controller/inference_pool.py); deleted
  # when routing is turned off (only a pool the service owns, by uid).
  - apiGroups: ["inference.networking.k8s.io"]
    resources: ["inferencepools"]
    verbs: ["get", "create", "patch", "delete"]
  {{- end }}
{{- end }}
