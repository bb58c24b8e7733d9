"""Root pytest configuration: shared fixture plugins (pytest only honours `pytest_plugins` here), run order,
and the wait for the tools a test needs.

Why an order: on a cold machine the Go tools and the Ansible test roots take tens of minutes to build.
hack/test.sh starts those builds in the background before pytest (hack/build-k8s.sh `all`: helm first, then
the control plane, then kube-score, promtool and LWS). Tests run in tiers by what they wait for: the suites
that need nothing, then the offline chart tests (helm), the Ansible suite (its roots are ready sooner), the
tests on a cluster (the core set), then the promtool and kube-score tests, and the multi-node tests (LWS)
last, so both cores stay busy instead of idling on a build while tests that could run wait behind it. The
real engine (hack/real-vllm.sh, stage `vllm`: vLLM 0.25.1 on CPU, network-bound) installs beside the Go
builds; its tests (tests/real, tests/fidelity) run in the tier of promtool and kube-score. `make test` runs the
Ansible suite and the scale smoke in a second, niced pytest beside this order (hack/test.sh, "lane B"); the
tiers still order them when one pytest runs everything.

Why the wait is here: a test's tools are waited for (or built) in a wrapper around the whole test protocol,
before pytest-timeout's per-test timer starts, so a cold build is not cut short by the 600 s test timeout;
the wait itself is bounded (harness/cluster.py TOOL_WAIT_SECONDS) and says what it waits for. A failed or
timed-out build is not retried: the test's own fixture asks again and fails with the build's message.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cluster import ToolBuildError, build_tools

pytest_plugins = ["tests.fixtures.examples", "tests.e2e.fixtures", "tests.e2e.operator_fixtures", "tests.real.engines"]

#: Fixture -> (hack/build-k8s.sh stage it needs, environment variable that supplies it instead).
STAGE_BY_FIXTURE = {
    "helm": ("helm", "AIS_HELM"),
    "cluster": ("core", "AIS_E2E_KUBECONFIG"),
    "gie_crd": ("gie-crds", "AIS_GIE_CRD"),
    "kube_score": ("kube-score", "AIS_KUBE_SCORE"),
    "lws": ("lws", "AIS_E2E_KUBECONFIG"),
    "real_vllm": ("vllm", "AIS_VLLM_PYTHON"),
}
#: `@pytest.mark.tools(STAGE)` for a test that runs a tool without a fixture; its override variable.
OVERRIDE_BY_STAGE = {"promtool": "AIS_PROMTOOL", "kube-score": "AIS_KUBE_SCORE", "helm": "AIS_HELM"}
#: Tiers, in run order: what a test waits for decides when it runs (see the module docstring).
TIER_BY_STAGE = {"helm": 1, "core": 3, "gie-crds": 3, "kube-score": 4, "promtool": 4, "vllm": 4, "lws": 5}
ANSIBLE_TIER = 2


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "tools(*stages): the hack/build-k8s.sh stages a test runs without a fixture naming them"
    )
    # hack/test.sh starts lane B with `&` from a non-interactive shell, which starts it with SIGINT ignored
    # (bash: "asynchronous commands ignore SIGINT"), and Python keeps an ignored SIGINT ignored: the fail-fast
    # `kill -INT` then did nothing, and a red quick tier still waited ~30 minutes for lane B (seen 2026-12-05).
    # Python's own handler makes SIGINT a KeyboardInterrupt again, so the fixtures tear down what they started.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def stages(item: pytest.Item) -> list[str]:
    """The build stages `item` waits for, in build order; none for a tool an environment variable supplies."""
    fixtures = getattr(item, "fixturenames", ())
    wanted = {s for f, (s, env) in STAGE_BY_FIXTURE.items() if f in fixtures and not os.environ.get(env)}
    for marker in item.iter_markers("tools"):
        wanted |= {s for s in marker.args if not os.environ.get(OVERRIDE_BY_STAGE.get(s, ""))}
    if item.get_closest_marker("e2e") is not None and not os.environ.get("AIS_E2E_KUBECONFIG"):
        wanted.add("core")
    return sorted(wanted, key=lambda s: TIER_BY_STAGE.get(s, 0))


def tier(item: pytest.Item) -> int:
    parts = Path(str(item.fspath)).resolve().relative_to(Path(__file__).parent.resolve()).parts
    suite = parts[1] if len(parts) > 2 else ""
    need = max((TIER_BY_STAGE.get(s, 0) for s in stages(item)), default=0)
    if item.get_closest_marker("e2e") is not None:
        need = max(need, TIER_BY_STAGE["core"])  # on kind too: the cluster tests keep their place
    return max(need, ANSIBLE_TIER if suite == "ansible" else 0)


@pytest.hookimpl(trylast=True)  # after the suites' own hooks have added their markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A file runs whole in the tier of its most demanding test, so its module fixtures (an operator, a
    # cluster-wide install) start once; a stable sort keeps pytest's own order within a tier.
    by_file: dict[Path, int] = {}
    for item in items:
        by_file[item.path] = max(by_file.get(item.path, 0), tier(item))
    items.sort(key=lambda item: by_file[item.path])


_ready: set[str] = set()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # outside pytest-timeout's wrapper: the wait is not timed
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    skipped = any(m.name == "skip" for m in item.iter_markers())
    todo = [s for s in stages(item) if s not in _ready] if not skipped else []
    if todo:
        capture = item.config.pluginmanager.getplugin("capturemanager")
        with capture.global_and_fixture_disabled():
            for stage in todo:
                t0 = time.monotonic()
                script = "hack/real-vllm.sh" if stage == "vllm" else f"hack/build-k8s.sh {stage}"
                print(f"\n[tools] {item.nodeid} needs {stage}: {script}", file=sys.stderr)
                try:
                    build_tools(stage)
                except ToolBuildError as exc:  # the test's fixture raises it again, as the test's error
                    print(f"[tools] {exc}", file=sys.stderr)
                    continue
                _ready.add(stage)
                if (spent := time.monotonic() - t0) > 1:
                    print(f"[tools] {stage} ready after {spent:.0f}s", file=sys.stderr)
    yield
