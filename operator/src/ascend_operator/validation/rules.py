"""Cross-field rules, each with its reason from the seed and, where CEL can say it, its CEL twin.

A rule is data: the field it names, the message (rule + why), an optional CEL expression with the schema
node it sits on, and a pure Python check. CEL rules guard with has(): the API server also evaluates them
against the `{}` defaults of optional objects. Rules over `additionalConfig.extra` have no CEL twin: CEL
cannot see the values of a free-form map, so the operator reports them as a condition and an event. The
CRD generator puts every CEL twin into `x-kubernetes-validations`, so `kubectl apply` rejects what CEL can
express; `validate_spec` runs every Python check, so `aisctl render` and the operator reject the same
specs without an API server.
"""

from ascend_operator.api.constants import GROUP, KNOWN_NPU_RESOURCES
from ascend_operator.api.profiles import load_profiles
from ascend_operator.contract import VLLM_VERSION
from ascend_operator.contract import additional_config as keys
from ascend_operator.contract import flags as F
from ascend_operator.render.env import API_KEY_ENV
from ascend_operator.render.pod import OPERATOR_LABELS
from ascend_operator.render.resources import build_resources, parse_quantity
from ascend_operator.validation.autoscaling_rules import AUTOSCALING_PD_RULES
from ascend_operator.validation.pd_rules import PD_RULES
from ascend_operator.validation.prefill_rules import PREFILL_RULES
from ascend_operator.validation.rule import Spec, SpecRule
from ascend_operator.validation.scheduling_rules import SCHEDULING_RULES
from ascend_operator.validation.surface import SURFACE, SurfaceFlags, cel_pattern, offending

#: Additional-config keys no code of vllm-ascend v0.25.1rc1 reads: an engine ignores them silently, so the
#: user would believe a setting is in force that is not.
REMOVED_ADDITIONAL_KEYS = keys.REMOVED
#: Typed additional-config keys: setting them in `extra` too would make one silently win.
TYPED_ADDITIONAL_KEYS = keys.TYPED_NAMES
#: docs/FACTS.md "Switches that did not pay": MC2 on A2 needs experts per device <= 24 and EP world >= 16.
MC2_MAX_EXPERTS_PER_DEVICE = 24
MC2_MIN_EP_WORLD = 16


def _graph_width_ok(spec: Spec) -> bool:
    spd = spec.engine.speculative
    if not spec.engine.long_context.enabled or spd is None:
        return True
    return (spd.num_speculative_tokens + 1) % spec.parallelism.tensor == 0


def _reduce_sample_ok(spec: Spec) -> bool:
    spd = spec.engine.speculative
    dspark = spd is not None and spd.method == "dspark"
    return not (spec.engine.additional_config.enable_reduce_sample and dspark)


def _extra_args_ok(spec: Spec) -> bool:
    return not F.typed_repeats(spec.engine.extra_args)


def _checks_unknown_args(spec: Spec) -> bool:
    return spec.engine.engine_version in (None, VLLM_VERSION)


def _extra_args_known(spec: Spec) -> bool:
    return not _checks_unknown_args(spec) or not F.unknown_options(spec.engine.extra_args)


def _model_type(spec: Spec) -> str | None:
    profile = load_profiles().get(spec.model.profile or "")
    return profile.model_type if profile else None


def _block_size_kept(spec: Spec) -> bool:
    """Only for a profile that names its model type: hybrid (mamba) models keep their own sizing, so a
    model the operator does not know is not guessed at."""
    model_type = _model_type(spec)
    if model_type is None:
        return True
    requested = spec.engine.block_size
    return keys.effective_block_size(requested, model_type=model_type) == requested


def _model_source_ok(spec: Spec) -> bool:
    src = spec.model.source
    return (src.host_path is None) != (src.pvc is None)


def _no_npu_in_resources(spec: Spec) -> bool:
    named = set(spec.resources.limits) | set(spec.resources.requests)
    return not named & set(KNOWN_NPU_RESOURCES)


def _pool_picker_ok(spec: Spec) -> bool:
    pool = spec.routing.inference_pool
    return not pool.enabled or pool.endpoint_picker_ref is not None


def _env_unique(spec: Spec) -> bool:
    names = [var.name for var in spec.env]
    return len(names) == len(set(names))


def _no_api_key_arg(spec: Spec) -> bool:
    # any spelling vLLM's parser reads as --api-key (--api_key, an unambiguous abbreviation)
    return not any(F.option_name(arg) == "--api-key" for arg in spec.engine.extra_args)


def _shm_fits(spec: Spec) -> bool:
    limit = build_resources(spec)["limits"].get("memory")
    return limit is None or parse_quantity(limit) > parse_quantity(spec.runtime.shm_size)


def _requests_within_limits(spec: Spec) -> bool:
    req, lim = spec.resources.requests, spec.resources.limits
    return all(parse_quantity(req[r]) <= parse_quantity(lim[r]) for r in ("cpu", "memory") if r in req and r in lim)


def _own_labels_untouched(spec: Spec) -> bool:
    return not any(k in OPERATOR_LABELS or k.startswith(f"{GROUP}/") for k in spec.pod_metadata.labels)


def _surface_rule(group: SurfaceFlags) -> "SpecRule":
    """A rule refusing extraArgs flags that take away what the operator watches the engine through."""
    return SpecRule(
        name=group.rule,
        field="spec.engine.extraArgs",
        message=group.message,
        check=lambda s: not offending(s.engine.extra_args, group.flags),
        detail=lambda s: "offending: " + " ".join(offending(s.engine.extra_args, group.flags)),
        cel=f"!has(self.extraArgs) || self.extraArgs.all(a, !a.matches('{cel_pattern(group.flags)}'))",
        cel_scope=("engine",),
        cel_field_path=".extraArgs",
    )


_OWN_LABELS = ", ".join(f"'{k}'" for k in OPERATOR_LABELS)


def _cel_spelling(spelling: str) -> str:
    """vLLM reads `_` as `-` in a long option's name (contract.flags.option_name); CEL must too."""
    return "--" + spelling[2:].replace("-", "[-_]") if spelling.startswith("--") else spelling


# Flags are plain [-a-zA-Z] words, so they need no regex escaping (and CEL strings take no `\-`). The
# suffix covers `--flag=value` and the dotted JSON keys `--speculative-config.method`.
_EXTRA_ARG_PATTERN = "^(" + "|".join(_cel_spelling(s) for s in sorted(F.TYPED_SPELLINGS)) + ")([.=].*)?$"

RULES: tuple[SpecRule, ...] = (
    SpecRule(
        name="ParallelismMatchesNPUs",
        field="spec.parallelism",
        message="spec.parallelism.tensor x spec.parallelism.data must equal spec.npus x spec.parallelism.nodes: "
        "a replica's NPUs are split into `data` engines of `tensor` NPUs (the seed runs DP1 x TP8 or DP2 x TP4 "
        "on 8 NPUs; vllm-ascend's two-node A2 tutorial DP4 x TP4 on 2 x 8)",
        check=lambda s: s.parallelism.tensor * s.parallelism.data == s.npus * s.parallelism.nodes,
        cel="!has(self.parallelism) || self.parallelism.tensor * self.parallelism.data == "
        "self.npus * (has(self.parallelism.nodes) ? self.parallelism.nodes : 1)",
        cel_field_path=".parallelism",
    ),
    SpecRule(
        name="DataParallelSplitsOverNodes",
        field="spec.parallelism.data",
        message="spec.parallelism.data must be a multiple of spec.parallelism.nodes: every node runs the same "
        "number of whole engines (`--data-parallel-size-local`), TP does not span nodes (vllm-ascend "
        "DeepSeek-R1 tutorial section 5.2: DP4 = 2 per node on two nodes)",
        check=lambda s: s.parallelism.data % s.parallelism.nodes == 0,
        cel="!has(self.nodes) || !has(self.data) || self.data % self.nodes == 0",
        cel_scope=("parallelism",),
        cel_field_path=".data",
    ),
    SpecRule(
        name="MultiNodeStartRank",
        field="spec.parallelism.nodes",
        message="spec.parallelism.nodes above 2 needs one engine per node (data = nodes): every worker shares "
        "one template, and its --data-parallel-start-rank is either the engines per node (two nodes) or its "
        "LWS worker index (one engine per node)",
        check=lambda s: s.parallelism.nodes <= 2 or s.parallelism.data == s.parallelism.nodes,
        cel="!has(self.nodes) || self.nodes <= 2 || (has(self.data) && self.data == self.nodes)",
        cel_scope=("parallelism",),
        cel_field_path=".nodes",
    ),
    SpecRule(
        name="LongContextGraphWidth",
        field="spec.engine.speculative.numSpeculativeTokens",
        message="with spec.engine.longContext.enabled, numSpeculativeTokens + 1 must be a multiple of "
        "spec.parallelism.tensor: the sequence-parallel graph width must align with TP (DSpark7 -> width 8 "
        "works on TP8, DSpark5 -> width 6 does not)",
        check=_graph_width_ok,
        cel="!has(self.engine) || !has(self.engine.longContext) || !self.engine.longContext.enabled || "
        "!has(self.engine.speculative) || !has(self.parallelism) || "
        "(self.engine.speculative.numSpeculativeTokens + 1) % self.parallelism.tensor == 0",
        cel_field_path=".engine",
    ),
    SpecRule(
        name="ReduceSampleWithDSpark",
        field="spec.engine.additionalConfig.enableReduceSample",
        message="spec.engine.additionalConfig.enableReduceSample cannot be used with DSpark speculative "
        "decoding: the seed's engine failed to start (graph capture fails)",
        check=_reduce_sample_ok,
        cel="!has(self.additionalConfig) || !has(self.additionalConfig.enableReduceSample) || "
        "!self.additionalConfig.enableReduceSample || !has(self.speculative) || self.speculative.method != 'dspark'",
        cel_scope=("engine",),
        cel_field_path=".additionalConfig",
    ),
    SpecRule(
        name="RemovedAdditionalConfigKey",
        field="spec.engine.additionalConfig.extra",
        message="spec.engine.additionalConfig.extra may not contain torchair_graph_config or "
        "ascend_scheduler_config: vllm-ascend removed them in v0.12.0rc1 and would ignore them silently",
        check=lambda s: not set(REMOVED_ADDITIONAL_KEYS) & set(s.engine.additional_config.extra),
    ),
    SpecRule(
        name="TypedAdditionalConfigKey",
        field="spec.engine.additionalConfig.extra",
        message="spec.engine.additionalConfig.extra may not set a key that has a typed field (or that "
        "spec.engine.longContext sets); set the typed field instead",
        check=lambda s: not set(TYPED_ADDITIONAL_KEYS) & set(s.engine.additional_config.extra),
    ),
    SpecRule(
        name="ExtraArgsRepeatTypedFlag",
        field="spec.engine.extraArgs",
        message="spec.engine.extraArgs may not repeat a flag that a typed field renders, in any spelling vLLM "
        "accepts (aliases such as -sc, --no-x, --x_y, --x.key): a repeated flag silently overrides one of "
        "the two values; use the field",
        check=_extra_args_ok,
        detail=lambda s: "offending: " + " ".join(F.typed_repeats(s.engine.extra_args)),
        cel=f"!has(self.extraArgs) || self.extraArgs.all(a, !a.matches('{_EXTRA_ARG_PATTERN}'))",
        cel_scope=("engine",),
        cel_field_path=".extraArgs",
    ),
    SpecRule(
        name="ExtraArgsUnknownFlag",
        field="spec.engine.extraArgs",
        message=f"spec.engine.extraArgs names a flag vLLM {VLLM_VERSION} does not accept: its `vllm serve` "
        "exits 2 (unrecognized arguments) and the pod crash-loops. For an engine image of another vLLM "
        "version, set spec.engine.engineVersion to that version to pass such flags unchecked",
        check=_extra_args_known,
        detail=lambda s: "unknown: " + " ".join(F.unknown_options(s.engine.extra_args)),
    ),
    *(_surface_rule(group) for group in SURFACE),
    SpecRule(
        name="BlockSizeKeptByVllmAscend",
        field="spec.engine.blockSize",
        message="spec.engine.blockSize must be one vllm-ascend keeps for the model profile's model type "
        "(vllm_ascend/utils.py refresh_block_size): 32, 64 or 128 on DeepSeek-V4, 128 on other non-hybrid "
        "models (prefix caching and chunked prefill are on); any other value is rewritten and the engine never "
        "matches the spec",
        check=_block_size_kept,
        detail=lambda s: (
            f"{s.engine.block_size} would run as "
            f"{keys.effective_block_size(s.engine.block_size, model_type=_model_type(s))}"
        ),
    ),
    SpecRule(
        name="BatchedTokensCoverSeqs",
        field="spec.engine.maxNumBatchedTokens",
        message="spec.engine.maxNumBatchedTokens must be at least spec.engine.maxNumSeqs: vLLM refuses to "
        "start when a step cannot hold one token per running sequence",
        check=lambda s: s.engine.max_num_batched_tokens >= s.engine.max_num_seqs,
        cel="!has(self.maxNumBatchedTokens) || !has(self.maxNumSeqs) || self.maxNumBatchedTokens >= self.maxNumSeqs",
        cel_scope=("engine",),
        cel_field_path=".maxNumBatchedTokens",
    ),
    *PREFILL_RULES,
    SpecRule(
        name="ModelSourceExactlyOne",
        field="spec.model.source",
        message="spec.model.source must set exactly one of hostPath or pvc",
        check=_model_source_ok,
        cel="has(self.hostPath) != has(self.pvc)",
        cel_scope=("model", "source"),
    ),
    SpecRule(
        name="NPUsFromSpec",
        field="spec.resources",
        message=f"spec.resources may not name an NPU resource ({', '.join(KNOWN_NPU_RESOURCES)}): set spec.npus, "
        "which also sizes the parallelism",
        check=_no_npu_in_resources,
        cel=" && ".join(
            f"(!has(self.{part}) || !('{name}' in self.{part}))"
            for name in KNOWN_NPU_RESOURCES
            for part in ("limits", "requests")
        ),
        cel_scope=("resources",),
    ),
    SpecRule(
        name="InferencePoolNeedsEndpointPicker",
        field="spec.routing.inferencePool.endpointPickerRef",
        message="spec.routing.inferencePool.endpointPickerRef is required when spec.routing.inferencePool is "
        "enabled: a GIE v1 InferencePool must name its endpoint picker (endpointPickerRef is +required)",
        check=_pool_picker_ok,
        cel="!has(self.enabled) || !self.enabled || has(self.endpointPickerRef)",
        cel_scope=("routing", "inferencePool"),
        cel_field_path=".endpointPickerRef",
    ),
    SpecRule(
        name="ApiKeyNotInArgs",
        field="spec.engine.extraArgs",
        message="spec.engine.extraArgs may not contain --api-key: anyone who can read the pod (or the "
        "node's process list) would see the key; set spec.auth.apiKeySecretRef",
        check=_no_api_key_arg,
        cel="!has(self.extraArgs) || self.extraArgs.all(a, !a.matches('^--api[-_]key(=.*)?$'))",
        cel_scope=("engine",),
        cel_field_path=".extraArgs",
    ),
    SpecRule(
        name="ApiKeyNotInEnv",
        field="spec.env",
        message=f"spec.env may not set {API_KEY_ENV}: its value would sit in the spec and the pod for anyone "
        "who can read them; set spec.auth.apiKeySecretRef",
        check=lambda s: all(var.name != API_KEY_ENV for var in s.env),
        cel=f"self.all(e, e.name != '{API_KEY_ENV}')",
        cel_scope=("env",),
    ),
    SpecRule(
        name="ShmWithinMemoryLimit",
        field="spec.resources.limits.memory",
        message="the engine's memory limit (spec.resources.limits.memory, else requests.memory) must exceed "
        "spec.runtime.shmSize: the memory-backed /dev/shm counts against the container's memory limit, so "
        "workers filling it would OOM-kill the engine",
        check=_shm_fits,
        # map['key'], not map.key: the API server's cost estimate knows the value's maxLength only then
        cel="!has(self.resources) || !has(self.runtime) || !has(self.runtime.shmSize) || "
        "((has(self.resources.limits) && 'memory' in self.resources.limits) ? "
        "quantity(self.resources.limits['memory']).isGreaterThan(quantity(self.runtime.shmSize)) : "
        "(!has(self.resources.requests) || !('memory' in self.resources.requests) || "
        "quantity(self.resources.requests['memory']).isGreaterThan(quantity(self.runtime.shmSize))))",
        cel_field_path=".resources",
    ),
    SpecRule(
        name="RequestsWithinLimits",
        field="spec.resources",
        message="spec.resources.requests may not exceed spec.resources.limits for cpu or memory: the API "
        "server would refuse every engine pod",
        check=_requests_within_limits,
        cel="!has(self.requests) || !has(self.limits) || ['cpu', 'memory'].all(r, !(r in self.requests) || "
        "!(r in self.limits) || !quantity(self.requests[r]).isGreaterThan(quantity(self.limits[r])))",
        cel_scope=("resources",),
    ),
    SpecRule(
        name="OperatorLabelsReserved",
        field="spec.podMetadata.labels",
        message=f"spec.podMetadata.labels may not set {GROUP}/ keys or the app.kubernetes.io labels the "
        "operator sets: the Service, the disruption budget and the operator select pods by them",
        check=_own_labels_untouched,
        cel=f"!has(self.labels) || self.labels.all(k, !k.startsWith('{GROUP}/') && !(k in [{_OWN_LABELS}]))",
        cel_scope=("podMetadata",),
    ),
    SpecRule(
        name="EnvNamesUnique",
        field="spec.env",
        message="spec.env may name each variable once",
        check=_env_unique,
    ),
    SpecRule(
        name="AutoscalingBounds",
        field="spec.autoscaling.minReplicas",
        message="spec.autoscaling.minReplicas may not exceed spec.autoscaling.maxReplicas",
        check=lambda s: s.autoscaling is None or s.autoscaling.min_replicas <= s.autoscaling.max_replicas,
        cel="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",
        cel_scope=("autoscaling",),
        cel_field_path=".minReplicas",
    ),
    *AUTOSCALING_PD_RULES,
    *PD_RULES,
    *SCHEDULING_RULES,
)
