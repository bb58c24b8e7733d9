"""Engine simulator: a vLLM-compatible server calibrated to the seed's Atlas 800 A2 figures, with faults.

Why this package exists: there is no NPU here, yet health checks, detectors, the renderer's args and the
demo all need an engine that speaks vLLM's HTTP API and metrics exactly, behaves like the seed's engine
under load, and can be made to stall, hang, drift, crash, load slowly or lose its speculative config.

Its own distribution (simulator/pyproject.toml, console script `aissim`), never a dependency of the operator:
nothing in ascend_operator imports it, and the operator image has no `vllm` command that could impersonate an
engine. It depends on the operator's package only for the pod conventions `aissim attach` reads.

Where to look:
- start it: `aissim serve <vllm serve args>` or `python -m aissim serve ...` (cli.py has
  the `--sim-*` flags and AIS_SIM_* env vars; a flag vLLM 0.25.1 does not declare is refused as vLLM refuses it);
- one process for every pod of a cluster: `aissim attach` (a `serve` process per pod) or `aissim attach
  --shared` (every engine in one process, ~0.2 MB each idle, for scale runs): attach.py, shared.py;
- routes and the fault API (`/sim/faults`, `/sim/state`): server.py;
- every calibrated figure, with its source in docs/FACTS.md: calibration.py;
- the request extension `"sim_prompt_tokens": N` (an N-token prompt without sending it): tokens.py;
- measuring it the seed's way: loadgen.py and perf/sim_sweep.py.
"""
