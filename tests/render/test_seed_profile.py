"""The example renders exactly the seed's production command and env (docs/FACTS.md "Production profile").

The figures ship in docs/ (FACTS.md and the write-up in docs/seed/); where the project's shared/seed/ sits
beside the checkout, the vendored copies must still equal it, so a fix made there is not silently lost here.
"""

import re
from pathlib import Path

import pytest

from ascend_operator.api.parse import ParsedService
from ascend_operator.render.args import build_engine_args
from ascend_operator.render.env import build_env
from ascend_operator.render.pod import Owner, build_pod
from tests.fixtures.examples import ROOT, SEED_PROFILE
from tests.fixtures.vllm_cli import parse_serve, read_shell_profile

FACTS = ROOT / "docs" / "FACTS.md"
WRITE_UP = ROOT / "docs" / "seed" / "000_4e6c58f8fd0f8ea3.txt"
SHARED_SEED = ROOT.parent / "shared" / "seed"


def test_vendored_profile_matches_facts() -> None:
    block = re.search(r"## Production profile \(final\)\n```\n(.*?)```", FACTS.read_text(), re.S)
    assert block is not None
    vendored = SEED_PROFILE.read_text().split("\n", 3)[3]
    assert vendored == block.group(1)


@pytest.mark.parametrize("vendored", [FACTS, WRITE_UP], ids=lambda p: p.name)
def test_docs_copy_equals_shared_seed_when_available(vendored: Path) -> None:
    original = SHARED_SEED / vendored.name
    if not original.exists():
        pytest.skip("shared/seed is not beside this checkout")
    assert vendored.read_bytes() == original.read_bytes(), f"copy {original} to {vendored}"


def test_rendered_args_equal_the_seed_command_flag_for_flag(example: ParsedService) -> None:
    """The seed's command, plus the one flag it relied on a default for (vLLM 0.25.1 resolves an absent
    async-scheduling flag to on, contract.flags.ASYNC_SCHEDULING, and the seed chose off), the one the
    operator adds: `--shutdown-timeout 45`, so a SIGTERM it did not drain first lets requests finish, and the
    one the example adds for the seed's mixed workload: `--long-prefill-token-threshold 2048`
    (docs/benchmarking.md "The seed's open question")."""
    _, seed_argv = read_shell_profile(SEED_PROFILE)
    rendered = build_engine_args(example.spec)
    added = ["--no-async-scheduling", "--shutdown-timeout", "45", "--long-prefill-token-threshold", "2048"]
    seed_settings, seed_unknown = parse_serve([*seed_argv[1:], *added])
    ours, our_unknown = parse_serve(rendered)
    assert seed_unknown == our_unknown == []
    assert vars(ours) == vars(seed_settings)
    assert (ours.async_scheduling, ours.shutdown_timeout) == (False, 45)
    # Same flags, none missing and none extra (argparse alone would hide a default-valued omission).
    seed_flags = sorted(a.split("=")[0] for a in [*seed_argv[2:], *added] if a.startswith("--"))
    our_flags = sorted(a for a in rendered if a.startswith("--"))
    assert our_flags == seed_flags


def test_seed_json_flags_survive_as_compact_json(example: ParsedService) -> None:
    rendered = build_engine_args(example.spec)
    spec_json = rendered[rendered.index("--speculative-config") + 1]
    assert spec_json == '{"method":"dspark","num_speculative_tokens":7,"enforce_eager":true}'
    assert rendered[rendered.index("--compilation-config") + 1] == '{"cudagraph_mode":"FULL_DECODE_ONLY"}'


def test_rendered_env_equals_the_seed_exports(example: ParsedService) -> None:
    seed_env, _ = read_shell_profile(SEED_PROFILE)
    env = build_env(example.spec)
    assert [(e["name"], e["value"]) for e in env] == list(seed_env.items())


def test_pod_runs_vllm_without_a_shell(example: ParsedService) -> None:
    pod = build_pod(example.spec, owner=Owner(name="dsv4-flash", namespace="default"), replica=0)
    container = pod["spec"]["containers"][0]
    assert "command" not in container  # the image's ENTRYPOINT stays (CANN images source set_env.sh there)
    assert container["args"][:2] == ["vllm", "serve"]
    assert not any(word in ("sh", "bash", "-c") for word in container["args"])
    assert all("\\" not in arg and "#" not in arg for arg in container["args"])
