"""Health that tells the truth: pure policies over engine samples, with an injected clock.

`samples` turns a /metrics scrape into an `EngineSample` by the one definition of forward progress
(`ascend_operator.canary.progress`, shared with the kubelet probe); the detectors (`stall`, `drift`,
`config`, `recycle`) take samples in and give findings out; `judge` and `machine` fold them into a pod's
verdict and actions, `group` judges a multi-node group as one. Whether a roll may happen now is not decided
here but by `ascend_operator.disruption`. No module here does I/O or reads a clock: the .importlinter
contracts forbid the I/O libraries, and the kubelet probe that does HTTP lives outside, in
`ascend_operator.canary`.
"""
