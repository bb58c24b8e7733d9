"""The rules of the scheduler's prefill knobs (spec.engine.longPrefillTokenThreshold and the partial-prefill
pair), with their CEL twins, so `kubectl apply` refuses what vLLM 0.25.1 would refuse at start.

Why a module: vLLM 0.25.1 checks these at engine start, minutes after apply on a 292 GB model. What it checks
(vllm 0.25.1 sdist): EngineArgs._check_feature_supported raises NotImplementedError "Concurrent Partial Prefill
is not supported" when max_num_partial_prefills or max_long_partial_prefills is not its default 1
(vllm/engine/arg_utils.py:2369-2379), called by create_engine_config before any config is built (:1856), so
SchedulerConfig's own checks on them (max_long <= max_num, chunked prefill on, threshold <= max_model_len:
vllm/config/scheduler.py:301-319) are never reached with any other value; the threshold itself only has to
be >= 0 (scheduler.py:80, the schema's minimum). vllm-ascend also resets max_num_partial_prefills to 1
(vllm_ascend/platform.py:1103-1109), which the V1 check precedes.
"""

from ascend_operator.validation.rule import SpecRule

_WHY = (
    "vLLM 0.25.1's V1 engine refuses to start with concurrent partial prefills (NotImplementedError "
    "'Concurrent Partial Prefill is not supported', vllm/engine/arg_utils.py:2369-2379); to let short prompts "
    "past a long one, set spec.engine.longPrefillTokenThreshold"
)

PREFILL_RULES: tuple[SpecRule, ...] = (
    SpecRule(
        name="NoConcurrentPartialPrefills",
        field="spec.engine.maxNumPartialPrefills",
        message=f"spec.engine.maxNumPartialPrefills must be 1 or unset: {_WHY}",
        check=lambda s: s.engine.max_num_partial_prefills in (None, 1),
        cel="!has(self.maxNumPartialPrefills) || self.maxNumPartialPrefills == 1",
        cel_scope=("engine",),
        cel_field_path=".maxNumPartialPrefills",
    ),
    SpecRule(
        name="NoConcurrentLongPartialPrefills",
        field="spec.engine.maxLongPartialPrefills",
        message=f"spec.engine.maxLongPartialPrefills must be 1 or unset: {_WHY}",
        check=lambda s: s.engine.max_long_partial_prefills in (None, 1),
        cel="!has(self.maxLongPartialPrefills) || self.maxLongPartialPrefills == 1",
        cel_scope=("engine",),
        cel_field_path=".maxLongPartialPrefills",
    ),
)
