"""The simulator enforces an API key as vLLM 0.25.1 does, so the operator's key handling is tested for real.

vLLM: `--api-key` (a list) over VLLM_API_KEY (vllm/entrypoints/openai/api_server.py:251-255); 401
{"error": "Unauthorized"} on /v1, /v2 and /inference without a matching bearer token, OPTIONS excepted;
/health, /metrics and the rest open (vllm/entrypoints/serve/utils/server_utils.py:42-93).
"""

import aiohttp

from aissim.args import parse_serve_args
from aissim.runtime import launch
from tests.sim.conftest import MODEL, SimFactory, base_args

KEY = "s3cret-key-value"


async def _status(session: aiohttp.ClientSession, method: str, url: str, **kwargs: object) -> int:
    async with session.request(method, url, **kwargs) as resp:  # type: ignore[arg-type]
        return resp.status


async def test_v1_needs_the_bearer_key_and_metrics_and_health_stay_open(sim: SimFactory) -> None:
    s = await sim(base_args("--api-key", KEY))
    body = {"model": MODEL, "prompt": "hi", "max_tokens": 2}
    good = {"Authorization": f"Bearer {KEY}"}
    assert await _status(s.session, "POST", s.base + "/v1/completions", json=body) == 401
    assert await _status(s.session, "GET", s.base + "/v1/models", headers={"Authorization": "Bearer wrong"}) == 401
    assert await _status(s.session, "GET", s.base + "/v1/models", headers={"Authorization": f"Basic {KEY}"}) == 401
    async with s.session.get(s.base + "/v1/models") as resp:
        assert (resp.status, await resp.json()) == (401, {"error": "Unauthorized"})
    assert await _status(s.session, "POST", s.base + "/v1/completions", json=body, headers=good) == 200
    assert await _status(s.session, "GET", s.base + "/v1/models", headers={"authorization": f"bearer {KEY}"}) == 200
    for path in ("/health", "/metrics", "/version"):
        assert await _status(s.session, "GET", s.base + path) == 200, path


async def test_without_a_key_everything_is_open(sim: SimFactory) -> None:
    s = await sim(base_args())
    assert await _status(s.session, "GET", s.base + "/v1/models") == 200


async def test_env_key_applies_when_no_flag_and_the_flag_wins_over_it() -> None:
    from_env = parse_serve_args(base_args(), env={"VLLM_API_KEY": KEY})
    assert from_env.api_keys == (KEY,)
    both = parse_serve_args(base_args("--api-key", "a"), env={"VLLM_API_KEY": KEY})
    assert both.api_keys == ("a",)
    assert parse_serve_args(base_args(), env={"VLLM_API_KEY": ""}).api_keys == ()


async def test_the_key_is_in_no_reported_config() -> None:
    cfg = parse_serve_args(base_args("--api-key", KEY), env={})
    assert KEY not in repr(cfg)
    assert "api_key" not in cfg.known
    running = await launch(cfg, exit_fn=lambda code: None)
    assert not isinstance(running, str)
    try:
        url = f"http://{running.host}:{running.port}/sim/state"
        async with aiohttp.ClientSession() as session, session.get(url) as resp:
            assert resp.status == 200
            assert KEY not in await resp.text()
    finally:
        await running.close()
