"""Autoscaling on what the engines do: a pure decision from the health pass's signals.

Why its own package: the decision (how many replicas, and why) is policy, tested with frozen time in
table tests; the controller only gathers the signals, keeps the window state between passes and writes
the answer to the scale subresource (controller/autoscaling.py). Every other path a replica change takes
(the disruption budget, the drain, the least busy replica leaving first) stays where it is: this package
only moves spec.replicas. No I/O, no clock: `now` is an argument. A P/D split's pools each decide here
on their own signals, and autoscale/disaggregation.py keeps the two counts within the user's ratio.
"""

from ascend_operator.autoscale.decide import ScaleDecision, ScaleHistory, Signals, decide, need, observe, wanted
from ascend_operator.autoscale.disaggregation import PoolAsk, PoolCount, resolve
from ascend_operator.autoscale.signals import mean_prompt_tokens, tpot_quantile, ttft_quantile

__all__ = [
    "PoolAsk",
    "PoolCount",
    "ScaleDecision",
    "ScaleHistory",
    "Signals",
    "decide",
    "mean_prompt_tokens",
    "need",
    "observe",
    "resolve",
    "tpot_quantile",
    "ttft_quantile",
    "wanted",
]
