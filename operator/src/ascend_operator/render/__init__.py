"""Pure builders from a validated spec to what runs: the `vllm serve` argument list, env, pod, Service.

No I/O and no clock: the same spec always renders the same objects, which is what makes whole-object
equality tests and the spec-hash change detection meaningful.
"""
