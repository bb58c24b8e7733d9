"""The rules of spec.autoscaling on a P/D split (spec.autoscaling.pd), with their CEL twins, so `kubectl
apply` refuses pool bounds or a decode-per-prefill ratio the autoscaler could never keep, naming the field.

Why a module of its own: they replace the earlier refusal of spec.autoscaling with spec.disaggregation
(issue 40 item 2), and belong to neither the P/D engine rules (pd_rules.py) nor the catalogue's single
AutoscalingBounds. Whether any pair of counts within both pools' bounds keeps the ratio is a search over
the prefill range, which CEL cannot express within the API server's cost budget: that one is checked by
the operator (a Warning event and status, as for every rule without a CEL twin).
"""

from ascend_operator.api.autoscaling import AutoscalingSpec, PdAutoscaling
from ascend_operator.validation.rule import Spec, SpecRule

#: The API's defaults, for CEL over fields a user left out.
_MIN, _AT_LEAST, _AT_MOST = 1, PdAutoscaling().decode_per_prefill.at_least, PdAutoscaling().decode_per_prefill.at_most


def _pool_ordered(spec: Spec, role: str) -> bool:
    auto = spec.autoscaling
    if auto is None or auto.pd is None:
        return True
    pool = auto.pool(role)
    return pool.min_replicas <= pool.max_replicas


def _pool_cel(role: str) -> str:
    pool = f"self.pd.{role}"
    low = f"(has({pool}.minReplicas) ? {pool}.minReplicas : (has(self.minReplicas) ? self.minReplicas : {_MIN}))"
    high = f"(has({pool}.maxReplicas) ? {pool}.maxReplicas : self.maxReplicas)"
    return f"!has(self.pd) || !has({pool}) || {low} <= {high}"


def _ratio_ordered(spec: Spec) -> bool:
    auto = spec.autoscaling
    if auto is None or auto.pd is None:
        return True
    ratio = auto.pd.decode_per_prefill
    return ratio.at_least <= ratio.at_most


def _feasible(spec: Spec) -> bool:
    auto: AutoscalingSpec | None = spec.autoscaling
    return auto is None or spec.disaggregation is None or auto.ratio_reachable()


_RATIO = "self.decodePerPrefill"

AUTOSCALING_PD_RULES: tuple[SpecRule, ...] = (
    SpecRule(
        name="AutoscalingPoolsNeedDisaggregation",
        field="spec.autoscaling.pd",
        message="spec.autoscaling.pd sets a P/D split's pools: it needs spec.disaggregation",
        check=lambda s: s.autoscaling is None or s.autoscaling.pd is None or s.disaggregation is not None,
        cel="!has(self.autoscaling) || !has(self.autoscaling.pd) || has(self.disaggregation)",
        cel_field_path=".autoscaling.pd",
    ),
    *(
        SpecRule(
            name=f"AutoscalingPoolBounds{role.title()}",
            field=f"spec.autoscaling.pd.{role}.minReplicas",
            message=f"the {role} pool's minReplicas (else spec.autoscaling.minReplicas) may not exceed its "
            "maxReplicas (else spec.autoscaling.maxReplicas)",
            check=lambda s, role=role: _pool_ordered(s, role),  # type: ignore[misc]
            cel=_pool_cel(role),
            cel_scope=("autoscaling",),
            cel_field_path=f".pd.{role}.minReplicas",
        )
        for role in ("prefill", "decode")
    ),
    SpecRule(
        name="AutoscalingRatioOrdered",
        field="spec.autoscaling.pd.decodePerPrefill.atLeast",
        message="spec.autoscaling.pd.decodePerPrefill.atLeast may not exceed atMost",
        check=_ratio_ordered,
        cel=f"!has({_RATIO}) || (has({_RATIO}.atLeast) ? {_RATIO}.atLeast : {_AT_LEAST}) <= "
        f"(has({_RATIO}.atMost) ? {_RATIO}.atMost : {_AT_MOST})",
        cel_scope=("autoscaling", "pd"),
        cel_field_path=".decodePerPrefill.atLeast",
    ),
    SpecRule(
        name="AutoscalingRatioReachable",
        field="spec.autoscaling.pd.decodePerPrefill",
        message="no prefill and decode counts within the pools' minReplicas..maxReplicas keep the decode per "
        "prefill ratio: widen a pool's bounds or the ratio",
        check=_feasible,
    ),
)
