"""Engine simulator: a vLLM-compatible server calibrated to the seed's Atlas 800 A2 figures, with faults.

Why this package exists: there is no NPU here, yet health checks, detectors, the renderer's args and the
demo all need an engine that speaks vLLM's HTTP API and metrics exactly, behaves like the seed's engine
under load, and can be made to stall, hang, drift, crash, load slowly or lose its speculative config.
Entry point: `aisctl sim serve <vllm serve args>` (cli.main) or `python -m ascend_operator.sim serve ...`.
"""
