#!/usr/bin/env bash
# The project's whole test command (`make test`, and what .ci/run calls): lint, type-check, then every
# pytest suite. The e2e and Ansible suites bring up what they need themselves (cached Kubernetes binaries,
# a debootstrap root), so this script stays a plain list of checks.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# Cold caches: start the slow builds (Go tools, Ansible test roots) now, beside the venv, lint and the quick
# suites. build-k8s.sh `all` builds helm, then the control plane (the core set), then kube-score, promtool and
# LWS, each under its own lock and stamp; pytest runs the tests in tiers by the tool they need (conftest.py)
# and waits for that tool's stamp only, so the cluster tests start once the core set is there while the
# extras build beside them. Warm, each only checks its stamps. Their output goes to a log that is printed if a
# build fails. If a check fails first, the builds go on filling the cache for the next run.
prefetch_log="$(mktemp -t ais-prefetch.XXXXXX)"
bash hack/build-k8s.sh all >/dev/null 2>>"$prefetch_log" &
prefetch=($!)
# The real engine (vLLM 0.25.1 on CPU, ~5 GB of wheels) downloads beside the CPU-bound Go builds.
bash hack/real-vllm.sh >/dev/null 2>>"$prefetch_log" &
prefetch+=($!)
for arch in arm64 amd64; do
  bash hack/ansible-root.sh "$arch" >/dev/null 2>>"$prefetch_log" &
  prefetch+=($!)
done
bash hack/venv.sh
echo "== ruff" >&2
.venv/bin/ruff check operator simulator tests perf harness hack
.venv/bin/ruff format --check operator simulator tests perf harness hack
echo "== mypy --strict" >&2
# mypy's cache outside the clone, by mypy's version (its entries are checked by content): a fresh clone's
# check takes ~1 s instead of ~20-60 s.
MYPY_CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/ascend-operator/mypy-$(.venv/bin/mypy --version | cut -d' ' -f2)" \
  .venv/bin/mypy
echo "== pytest" >&2
set +e
# --durations: the 30 slowest tests are listed before pytest's summary line, so a run over its time budget
# says where the time went.
if [[ $# -gt 0 ]]; then
  .venv/bin/pytest --durations=30 "$@"
  rc=$?
else
  # Two lanes. The Ansible suite (its arm64 node runs every module under qemu: ~7 CPU-minutes), the scale
  # smoke and the e2e files whose verdicts do not hang on engine timing (objects made, commands run, drills on
  # control planes of their own, the demo) run in a second pytest beside the main one, on a control plane of
  # its own, niced: the cluster tests mostly wait on engine timers and leave a core idle, which lane B fills,
  # and the timing-sensitive health, disruption and real-engine tests keep priority in lane A. Serial, the
  # Ansible suite and the scale smoke alone added ~11 minutes (2026-12-03); with lane A at ~48 minutes warm
  # (2026-12-04), the e2e files below (~14 minutes) and the chart's suite moved here to even the lanes out
  # (2026-12-05 warm: lane A 30.2 min of pytest, lane B 19.1, the whole run 33.0; then the chart's suite and
  # the reconcile basics of test_operator.py, ~13 short tests, joined lane B: 19.8 min, the whole run 33.9;
  # then test_node_lost.py, ~3 min on this lane's cluster (its KWOK restart disturbs no lane A test), and
  # test_autoscaling_pd.py (1-2 min), test_rollout_analysis.py (two judged rollouts under load and the
  # rollout CLI, ~1.5 min) and test_autoscaling.py (~1.5 min with the real HPA controller's part: its windows
  # are 5 and 15 s, wide of any scheduling delay)).
  lane_b=(
    tests/ansible tests/e2e/test_scale.py tests/e2e/test_drills.py tests/e2e/test_demo.py
    tests/e2e/test_security.py tests/e2e/test_cluster.py tests/e2e/test_deploy_guide.py
    tests/e2e/test_playbook_drain.py tests/e2e/test_kube_client.py tests/e2e/test_strict_apply.py
    tests/e2e/test_why.py tests/e2e/test_render_matches.py tests/e2e/test_routing.py tests/e2e/test_bench.py
    tests/e2e/test_operator.py tests/helm tests/e2e/test_node_lost.py tests/e2e/test_autoscaling_pd.py
    tests/e2e/test_rollout_analysis.py tests/e2e/test_autoscaling.py
  )
  lane_b_log="$(mktemp -t ais-lane-b.XXXXXX)"
  nice -n 10 .venv/bin/pytest -p no:cacheprovider --durations=10 "${lane_b[@]}" >"$lane_b_log" 2>&1 &
  lane_b_pid=$!
  # Fail fast: the suites that need no tool (models, renderer, validation, health, disruption, simulator,
  # engine contract; a few minutes) run first and stop at the first failure, and then nothing else runs:
  # lane B is interrupted (SIGINT, so its fixtures tear down what they started) rather than left running
  # for twenty minutes on a change that is already red.
  quick=(tests/unit tests/api tests/render tests/validation tests/health tests/disruption tests/autoscale
         tests/rollout_analysis tests/clients tests/controller tests/bench tests/cli tests/perf tests/playbooks
         tests/sim tests/contract)
  # On two workers (pytest-xdist; these tests share nothing: no cluster, no fixed port): 102.8 s in the warm
  # CI of 2026-12-05 against 213 s serial in the one before it, off lane A's path.
  .venv/bin/pytest -x -n "${AIS_QUICK_WORKERS:-2}" --durations=10 "${quick[@]}"
  rc=$?
  if [[ $rc -ne 0 ]]; then
    kill -INT "$lane_b_pid" 2>/dev/null
    wait "$lane_b_pid"
    echo "== the quick suites failed (exit $rc): the cluster, Helm, Ansible and real-engine suites did not run" >&2
    exit "$rc"
  fi
  .venv/bin/pytest --durations=30 "${lane_b[@]/#/--ignore=}" "${quick[@]/#/--ignore=}"
  rc=$?
  wait "$lane_b_pid"
  rc_b=$?
  echo "== pytest lane B (${lane_b[*]}), exit $rc_b" >&2
  cat "$lane_b_log"
  rm -f "$lane_b_log"
  [[ $rc -eq 0 ]] && rc=$rc_b  # either lane failing fails the run; lane B's 5 (nothing collected) too, below
fi
for pid in "${prefetch[@]}"; do
  wait "$pid" || { echo "a background build failed:" >&2; tail -n 40 "$prefetch_log" >&2; }
done
rm -f "$prefetch_log"
set -e
# pytest exits 5 when it collected no test: that is a broken suite here, not a pass.
if [[ $rc -eq 5 ]]; then
  echo "pytest collected no tests" >&2
  exit 1
fi
exit $rc
