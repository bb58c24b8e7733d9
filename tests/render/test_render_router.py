"""The router a user gets in front of a service: what it discovers, how much it admits, what it may read.

Why it exists: the router must send requests only to the engine pods the operator judged ready (its
selector and namespace), hold back what the engines cannot run (the derived admission budget), never see
the API key in its argument list, have exactly the rights its pod watcher uses, and be judged ready on the
router's own readiness route. The last tests hand the rendered arguments to vllm-router 0.1.17 itself:
every flag must exist in its `--help`, and its own parser must read them back into the intended settings.
"""

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ascend_operator.api.constants import LABEL_SERVICE
from ascend_operator.api.router import RouterSpec
from ascend_operator.api.security import SecretKeyRef
from ascend_operator.render.pod import LEADER_SELECTOR, Owner
from ascend_operator.render.router import (
    API_KEY_ENV,
    RouterTarget,
    build_router_args,
    build_router_deployment,
    build_router_objects,
    build_router_pdb,
    build_router_role,
    build_router_role_binding,
    build_router_service,
    max_concurrent_requests,
    router_labels,
)

OWNER = Owner(name="dsv4-flash", namespace="serving", uid="uid-1")
IMAGE = "docker.io/vllm/vllm-router:v0.1.17"
SELECTOR = {LABEL_SERVICE: OWNER.name}
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def router_bin() -> Path:
    """vllm-router 0.1.17 as hack/vllm-router.sh installs it (cached outside the repo; seconds when warm)."""
    out = subprocess.run(["bash", str(REPO / "hack" / "vllm-router.sh")], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    return Path(out.stdout.strip().splitlines()[-1])


def _spec(**fields: Any) -> RouterSpec:
    return RouterSpec.model_validate({"image": IMAGE, **fields})


def _target(**fields: Any) -> RouterTarget:
    base: dict[str, Any] = {
        "owner": OWNER,
        "engine_port": 8000,
        "engine_selector": SELECTOR,
        "engine_replicas": 3,
        "max_num_seqs": 32,
    }
    return RouterTarget(**{**base, **fields})


def _value(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def _words_after(args: list[str], flag: str) -> list[str]:
    """The words of a multi-valued flag (`--selector k=v k=v`), up to the next flag."""
    rest = args[args.index(flag) + 1 :]
    end = next((i for i, word in enumerate(rest) if word.startswith("--")), len(rest))
    return rest[:end]


def test_the_router_discovers_the_serving_pods_of_its_own_namespace_on_the_engine_port() -> None:
    args = build_router_args(_spec(), _target())
    assert "--service-discovery" in args
    assert _words_after(args, "--selector") == [f"{LABEL_SERVICE}={OWNER.name}"]
    assert _value(args, "--service-discovery-namespace") == "serving"
    assert _value(args, "--service-discovery-port") == "8000"
    assert _value(args, "--host") == "0.0.0.0"  # the router's default, 127.0.0.1, no Service could reach
    assert _value(args, "--policy") == "cache_aware"


def test_a_multi_node_service_is_routed_to_its_leaders_only() -> None:
    args = build_router_args(_spec(), _target(engine_selector={**SELECTOR, **LEADER_SELECTOR}))
    assert sorted(_words_after(args, "--selector")) == sorted(
        [f"{LABEL_SERVICE}={OWNER.name}", "leaderworkerset.sigs.k8s.io/worker-index=0"]
    )


def test_admission_defaults_to_the_engines_running_slots() -> None:
    # 3 replicas x 32 maxNumSeqs: the 97th concurrent request gets 429 + Retry-After from the router, not a
    # place in an engine's queue (0.1.17's own queue does not hold: docs/router.md).
    args = build_router_args(_spec(), _target())
    assert _value(args, "--max-concurrent-requests") == str(3 * 32)
    assert _value(args, "--queue-size") == "0"
    assert _value(args, "--queue-timeout-secs") == "60"
    assert _value(args, "--rate-limit-tokens-per-second") == "1"  # a cap, not a rate: see the field
    # data-parallel engines each schedule maxNumSeqs; several router replicas split the budget
    assert max_concurrent_requests(_spec(), _target(data_parallel=2)) == 3 * 2 * 32
    assert max_concurrent_requests(_spec(replicas=2), _target()) == 3 * 32 // 2
    assert max_concurrent_requests(_spec(), _target(engine_replicas=0)) == 1


def test_an_explicit_admission_budget_wins() -> None:
    spec = _spec(admission={"maxConcurrentRequests": 500, "queueSize": 0, "refillPerSecond": 50})
    args = build_router_args(spec, _target())
    assert _value(args, "--max-concurrent-requests") == "500"
    assert _value(args, "--queue-size") == "0"
    assert _value(args, "--rate-limit-tokens-per-second") == "50"


def test_retries_and_breaker_render_their_numbers_or_their_off_switch() -> None:
    args = build_router_args(_spec(retries={"maxRetries": 2}, circuitBreaker={"failureThreshold": 4}), _target())
    assert _value(args, "--retry-max-retries") == "2"
    assert _value(args, "--retry-backoff-multiplier") == "1.5"
    assert _value(args, "--cb-failure-threshold") == "4"
    assert _value(args, "--cb-timeout-duration-secs") == "60"
    off = build_router_args(_spec(retries={"enabled": False}, circuitBreaker={"enabled": False}), _target())
    assert "--disable-retries" in off
    assert "--disable-circuit-breaker" in off
    assert not any(word.startswith(("--retry-", "--cb-")) for word in off)


def test_the_api_key_reaches_the_router_through_env_never_its_arguments() -> None:
    ref = SecretKeyRef(name="engine-key", key="api-key")
    deployment = build_router_deployment(_spec(), _target(api_key=ref))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["env"] == [
        {"name": API_KEY_ENV, "valueFrom": {"secretKeyRef": {"name": "engine-key", "key": "api-key"}}}
    ]
    words = " ".join([*container["command"], *container["args"]])
    assert "engine-key" not in words
    assert "--api-key" not in words
    assert "env" not in build_router_deployment(_spec(), _target())["spec"]["template"]["spec"]["containers"][0]


def test_the_role_grants_exactly_what_the_pod_watcher_uses() -> None:
    role = build_router_role(_target())
    assert role["kind"] == "Role"  # namespaced: --service-discovery-namespace keeps the watch in one namespace
    assert role["metadata"]["namespace"] == "serving"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}]
    binding = build_router_role_binding(_target())
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    pod = build_router_deployment(_spec(), _target())["spec"]["template"]["spec"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": "serving"}
    ]


def test_the_router_is_ready_only_with_an_engine_and_runs_without_privilege() -> None:
    deployment = build_router_deployment(_spec(replicas=2), _target())
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readiness", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/liveness", "port": "http"}
    assert container["ports"][0] == {"name": "http", "containerPort": 30000, "protocol": "TCP"}
    security = container["securityContext"]
    assert security["privileged"] is False
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["runAsNonRoot"] is True
    assert container["resources"]["limits"]["memory"] == container["resources"]["requests"]["memory"]
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}


def test_router_pods_are_not_engine_pods() -> None:
    # The engine Service, the engine budget and the router's own --selector select LABEL_SERVICE: a router
    # pod carrying it would be routed to by the router itself and counted as an engine.
    labels = router_labels(_target(labels={"team": "a"}))
    assert LABEL_SERVICE not in labels
    assert labels["team"] == "a"
    selectors = [
        build_router_deployment(_spec(), _target())["spec"]["selector"]["matchLabels"],
        build_router_service(_spec(), _target())["spec"]["selector"],
        build_router_pdb(_target())["spec"]["selector"]["matchLabels"],
    ]
    for selector in selectors:
        assert selector.items() <= labels.items()
        assert not selector.items() <= SELECTOR.items()


def test_every_object_is_owned_by_the_service_and_named_after_it() -> None:
    objects = build_router_objects(_spec(), _target())
    assert [o["kind"] for o in objects] == [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
    ]
    for obj in objects:
        assert obj["metadata"]["name"] == "dsv4-flash-router"
        assert obj["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert build_router_pdb(_target())["spec"]["maxUnavailable"] == 1


def test_the_spec_refuses_what_the_router_would_not_take() -> None:
    with pytest.raises(ValidationError, match="policy"):
        _spec(policy="kv_aware")  # vLLM 0.25.1 serves no KV event sources for it
    with pytest.raises(ValidationError, match="maxConcurrentRequests"):
        _spec(admission={"maxConcurrentRequests": 0})
    with pytest.raises(ValidationError, match="retry"):
        _spec(retry={"maxRetries": 1})  # misspelt key: refused, not ignored
    with pytest.raises(ValidationError, match="image"):
        RouterSpec.model_validate({})


def _rendered_args() -> list[str]:
    ref = SecretKeyRef(name="engine-key", key="api-key")
    return build_router_args(_spec(admission={"queueSize": 7}), _target(api_key=ref))


def test_every_rendered_flag_is_one_vllm_router_0_1_17_has(router_bin: Path) -> None:
    help_text = subprocess.run([str(router_bin), "--help"], capture_output=True, text=True, check=True).stdout
    flags = {word for word in _rendered_args() if word.startswith("--")}
    missing = sorted(flag for flag in flags if f"{flag} " not in help_text and f"{flag}\n" not in help_text)
    assert not missing


PARSE = """
import dataclasses, json, sys
from vllm_router.launch_router import parse_router_args
parsed = parse_router_args(json.loads(sys.argv[1]))
parsed._validate_router_args()
print(json.dumps(dataclasses.asdict(parsed), default=str))
"""


def test_vllm_router_s_own_parser_reads_the_rendered_arguments_back(router_bin: Path) -> None:
    python = router_bin.parent / "python"
    out = subprocess.run(
        [str(python), "-c", PARSE, json.dumps(_rendered_args())], capture_output=True, text=True, check=True
    ).stdout
    parsed = json.loads(out)
    assert parsed["service_discovery"] is True
    assert parsed["selector"] == SELECTOR
    assert parsed["service_discovery_namespace"] == "serving"
    assert parsed["service_discovery_port"] == 8000
    assert parsed["host"] == "0.0.0.0"
    assert parsed["max_concurrent_requests"] == 96
    assert parsed["queue_size"] == 7
    assert parsed["rate_limit_tokens_per_second"] == 1
    assert parsed["policy"] == "cache_aware"
    assert parsed["api_key"] is None
    assert parsed["vllm_pd_disaggregation"] is False
    assert parsed["retry_backoff_multiplier"] == 1.5
    assert parsed["prometheus_host"] == "0.0.0.0"


def _router_deployment_digest(replicas: int, autoscaling: dict[str, Any] | None) -> str:
    """The digest of the router Deployment's spec the operator applies for this spec.replicas."""
    import hashlib

    from ascend_operator.api.parse import parse_spec
    from ascend_operator.render.desired import Desired

    body: dict[str, Any] = {
        "image": "img",
        "replicas": replicas,
        "model": {"path": "/models/m", "servedName": "m", "source": {"hostPath": {"path": "/models/m"}}},
        "router": {"image": IMAGE},
    }
    if autoscaling is not None:
        body["autoscaling"] = autoscaling
    objects = Desired(spec=parse_spec(body), owner=OWNER).router
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    return hashlib.sha256(json.dumps(deployment["spec"], sort_keys=True).encode()).hexdigest()


def test_an_autoscaled_scale_step_leaves_the_router_deployment_as_it_is() -> None:
    # without autoscaling the budget follows spec.replicas: each scale step is a new pod template, so
    # Kubernetes replaces every router pod (the measurement that made the autoscaled budget use maxReplicas)
    assert _router_deployment_digest(1, None) != _router_deployment_digest(2, None)
    # with spec.autoscaling the budget is maxReplicas' slots: no step between min and max changes the template
    auto = {"minReplicas": 1, "maxReplicas": 3}
    assert len({_router_deployment_digest(n, auto) for n in (1, 2, 3)}) == 1
