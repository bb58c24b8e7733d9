"""Run every check on a spec: the cross-field rules, the MC2 warning and the HBM/KV budget (and, for a
disaggregated spec, the same on each role's spec)."""

from dataclasses import replace

from ascend_operator.api.disaggregation import PdRole
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.render.disaggregation import ROLES, role_spec
from ascend_operator.validation.budget import BudgetFit, BudgetInput, BudgetPlan, load_profiles, plan_budget
from ascend_operator.validation.findings import Severity, SpecFinding
from ascend_operator.validation.rules import MC2_MAX_EXPERTS_PER_DEVICE, MC2_MIN_EP_WORLD, RULES


def budget_input(spec: AscendInferenceServiceSpec) -> BudgetInput:
    """What the budget needs from a spec."""
    return BudgetInput(
        profile=spec.model.profile,
        tensor=spec.parallelism.tensor,
        data=spec.parallelism.data,
        utilization=spec.engine.gpu_memory_utilization,
        max_model_len=spec.engine.max_model_len,
        max_num_batched_tokens=spec.engine.max_num_batched_tokens,
        long_context=spec.engine.long_context.enabled,
        nodes=spec.parallelism.nodes,
    )


def mc2_findings(spec: AscendInferenceServiceSpec) -> list[SpecFinding]:
    """Warn when MC2 switches are set on a topology where vllm-ascend keeps ALLGATHER anyway."""
    addl = spec.engine.additional_config
    if not (addl.enable_prefill_mc2 or addl.enable_fused_mc2):
        return []
    par = spec.parallelism
    ep_world = par.tensor * par.data if par.expert else 1
    profile = load_profiles().get(spec.model.profile or "")
    experts = profile.routed_experts if profile else None
    per_device = experts // ep_world if experts else None
    if ep_world >= MC2_MIN_EP_WORLD and (per_device is None or per_device <= MC2_MAX_EXPERTS_PER_DEVICE):
        return []
    shown = f"{experts} experts / EP{ep_world} = {per_device} per device" if per_device else f"EP{ep_world}"
    return [
        SpecFinding(
            severity=Severity.WARNING,
            field="spec.engine.additionalConfig.enablePrefillMc2",
            rule="MC2Preconditions",
            message=f"enablePrefillMc2 / enableFusedMc2 have no effect here ({shown}): MC2 on A2 needs at most "
            f"{MC2_MAX_EXPERTS_PER_DEVICE} experts per device and an EP world of at least {MC2_MIN_EP_WORLD}, "
            "so MoE communication silently stays ALLGATHER",
        )
    ]


def budget_findings(plan: BudgetPlan) -> list[SpecFinding]:
    """Turn the budget verdict into a finding."""
    severity = {
        BudgetFit.CANNOT_START: Severity.ERROR,
        BudgetFit.TIGHT: Severity.WARNING,
        BudgetFit.SKIPPED: Severity.NOTE,
    }.get(plan.verdict)
    if severity is None:
        return []
    detail = plan.note
    if plan.needed_gib is not None and plan.free_kv_gib is not None:
        detail = (
            f"needs ~{plan.needed_gib:.1f} GiB of KV per NPU to start, {plan.free_kv_gib:.1f} GiB free "
            f"({plan.needed_gib / plan.free_kv_gib:.0%}): {plan.note}; lower spec.engine.maxNumBatchedTokens "
            "or spec.engine.maxModelLen"
        )
    return [SpecFinding(severity=severity, field="spec.engine.maxNumBatchedTokens", rule="HBMBudget", message=detail)]


def validate_spec(spec: AscendInferenceServiceSpec) -> list[SpecFinding]:
    """All findings for a spec, errors first in rule order."""
    findings = [
        SpecFinding(
            severity=Severity.ERROR,
            field=rule.field,
            rule=rule.name,
            message=f"{rule.message} ({rule.detail(spec)})" if rule.detail else rule.message,
        )
        for rule in RULES
        if not rule.check(spec)
    ]
    findings += mc2_findings(spec)
    findings += budget_findings(plan_budget(budget_input(spec)))
    return findings + role_findings(spec, findings)


#: A role's rule whose failure a rule of the parent (validation/pd_rules.py) already reports, at the pool.
_COVERED = {
    "ParallelismMatchesNPUs": "PoolParallelismMatchesNPUs",
    "NoRecomputeSchedulerOnDecodeRole": "NoRecomputeSchedulerOnDecodePool",
}
#: A role's autoscaling bounds are its pool's: the parent's bounds rules already report them.
_POOL_BOUNDS = {"AutoscalingBounds", "AutoscalingPoolBoundsPrefill", "AutoscalingPoolBoundsDecode"}


def _in_pool(field: str, role: PdRole, spec: AscendInferenceServiceSpec) -> str:
    """A role's finding on a field its pool sets, named at the pool (`spec.disaggregation.decode.engine...`)."""
    assert spec.disaggregation is not None
    pool = spec.disaggregation.prefill if role is PdRole.PREFILL else spec.disaggregation.decode
    for part, own in (("engine", pool.engine), ("parallelism", pool.parallelism)):
        if own is not None and (field == f"spec.{part}" or field.startswith(f"spec.{part}.")):
            return f"spec.disaggregation.{role.value}{field[len('spec') :]}"
    return field


def role_findings(spec: AscendInferenceServiceSpec, own: list[SpecFinding]) -> list[SpecFinding]:
    """A disaggregated spec's roles checked as the services they become (a pool's engine settings meet the
    same rules and HBM budget), named at the pool's field; what the parent's own findings already say is
    not repeated."""
    if spec.disaggregation is None:
        return []
    seen = {(f.rule, f.field, f.message) for f in own}
    said = {f.rule for f in own}
    found: list[SpecFinding] = []
    for role in ROLES:
        for f in validate_spec(role_spec(spec, role, group="validation")):
            named = replace(f, field=_in_pool(f.field, role, spec), message=f"{role.value} pool: {f.message}")
            repeated = (f.rule, f.field, f.message) in seen or _COVERED.get(f.rule) in said
            repeated = repeated or (f.rule == "AutoscalingBounds" and bool(_POOL_BOUNDS & said))
            if not repeated and f.severity is not Severity.NOTE:
                found.append(named)
    return found
