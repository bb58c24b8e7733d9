"""`aisctl bench`: a benchmark that applies the seed's four rules by default (docs/FACTS.md "Benchmark pitfalls").

Why this package exists: the seed's figures were nearly wrong three times (a reused prompt served from the
prefix cache, client-side TTFT on reasoning streams, variable-length output) and a failed run once passed
through `|| true`. Platform teams choose TP8 vs DP2 x TP4 or DSpark5 vs DSpark7 from such numbers, so the
harness refuses a run that breaks a rule instead of printing it. Layout: prompts / metrics / rules / report
are pure and unit-tested; client holds the HTTP I/O; runner measures one point; scenarios composes them;
plot draws the PNG (optional `bench` extra); ascend_operator.cli.bench is the command.

Result JSON (`result.json`, schema `bench.ascend.dev/v1`):

- `schema`, `scenario` (sweep | prefill | mixed | ab), `seed` (every prompt derives from it), `command`,
  `parameters` (the scenario's knobs), `started_at` / `finished_at` (UTC ISO 8601), `ais` (the measured
  AscendInferenceService and its spec hash, or null for a bare URL).
- `endpoints.<label>`: `url`, `models` and `max_model_len` (/v1/models), `root`, `version` (/version),
  `cache_config` (the labels of `vllm:cache_config_info`: the engine's effective CacheConfig), `clock`
  (`wall`, or `aissim` whose figures are its scaled engine seconds) and `time_scale`, `model` (the one
  asked), `calibration` (characters per token and the probe requests that measured it).
- `points[]`: `endpoint`, `label`, `concurrency`, `context`, `requests`, `succeeded`, `aborted` (given up
  by the client on its timeout; vLLM does not count these), `output_tok_s`
  (engine generated-token delta per second), `engine` {`ttft_mean_s`, `ttft_p50_s`, `ttft_p99_s`,
  `tpot_mean_s` (histogram deltas), `finished`, `finished_length`, `prefix_cache_queries`,
  `prefix_cache_hits`, `prefix_cache_hit_rate`, `preemptions`, `kv_peak`, `running_peak`}, `client`
  {`ttft_mean_s`, `ttft_p99_s`, `tpot_mean_s`, `latency_mean_s`}, `lengths` {requested and measured
  prompt / completion tokens}, `wall_s`, `engine_s`, `checks[]` {`name`, `ok`, `detail`}, `ok`.
- `mixed` (mixed only): the long request's progress, max gap, decode tok/s against the 50 tok/s target,
  the short requests' TTFT p50 / p99 / max, KV peak, preemptions; `criteria` (bench/acceptance.py: the
  seed's criteria against the `--baseline` points "long alone" and "shorts alone", met or not, None without
  a baseline) and `timeline` (engine seconds: each short request's send and TTFT, the long request's send,
  first token and progress). Against aissim every request's times are its engine's (GET /sim/requests).
- `mixed_ab` (mixed-ab only): per side the median of each figure over its rounds, `b_vs_a_pct`, `rounds[]`.
- `ab` (ab only): per side mean and spread (stdev %) of output tok/s, TTFT, TPOT; `b_vs_a_pct`.
- `checks[]` (scenario level, including `result_complete`), `failed[]` (every failed check), and
  `verdict`: PASS only when nothing failed; `aisctl bench` exits 1 otherwise.
"""
