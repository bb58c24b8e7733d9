"""One scripted scenario, run the same way against the real engine and against the simulator.

Why a module of its own: the fidelity tier's test (test_fidelity.py) compares two recordings of this
scenario, one from vLLM 0.25.1 on CPU and one from `aissim serve` with the same pod args. The recording is
what each engine showed, not what either should show: the comparison decides, and the real engine is the
judge.

What is recorded: a snapshot of every `vllm:` series (counters, gauges, histogram _count/_sum; no _created
timestamps, no buckets, whose bounds are the sim's calibration) at the edges of each step, and the
bodies the OpenAI routes answered. Prompts are token-id lists (ids 33-126: printable bytes of the real
engine's byte-level tokenizer), so a prompt is exactly as long on both engines, whatever each tokenizer
would make of text; each step's prompts are distinct, so no step hits the prefix cache another filled.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

MODEL = "deepseek-v4-flash"
KEY = "fidelity-key"

#: A series: (sample name, its labels but `le`, sorted).
Series = tuple[str, tuple[tuple[str, str], ...]]
Snapshot = dict[Series, float]

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"


@dataclass
class Target:
    """One engine under the scenario: where it answers, and how to hang and resume its engine core."""

    name: str
    base: str
    hang: Callable[[], None]
    resume: Callable[[], None]
    terminate: Callable[[], None]
    """SIGTERM to the server process (what the kubelet sends a deleted pod's container)."""
    running: Callable[[], bool]
    """Whether that process still runs."""
    key: str = KEY
    outlast: int = 1
    """How many times C4_TOKENS and HANG_TOKENS this engine's long outputs are. vLLM on CPU decodes the tiny
    dummy model at ~500 tok/s a stream, ~20x aissim's step: at 1x its four 512-token streams ended before a
    client thread on a loaded 2-core CI machine had read two chunks of each (seen in CI, 2026-12-05)."""
    state: Callable[[], str] = lambda: ""
    """What a failed scenario reports of this engine: its processes' states, the host's load, its log's tail
    (a timed-out read otherwise says nothing of whether the engine core was still stopped)."""


@dataclass
class Step:
    """What one step recorded: snapshots by moment ('before', 'during', ..., 'after') and facts."""

    snapshots: dict[str, Snapshot] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(repr=False)
class Recording:
    target: str
    steps: dict[str, Step] = field(default_factory=dict)
    families: dict[str, Family] = field(default_factory=dict)
    bodies: dict[str, Any] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def __repr__(self) -> str:  # pytest prints fixtures' values in failures: not megabytes of snapshots
        return f"Recording({self.target}, steps={list(self.steps)})"


# --- HTTP ---------------------------------------------------------------------------------------------


def _request(url: str, body: Any | None, *, key: str | None, timeout: float) -> tuple[int, bytes]:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers=headers, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def post(base: str, path: str, body: dict[str, Any], *, key: str | None, timeout: float = 120.0) -> Any:
    """(status, JSON body) of one POST."""
    status, raw = _request(base + path, body, key=key, timeout=timeout)
    return status, json.loads(raw) if raw else None


def ok(base: str, path: str, body: dict[str, Any], *, key: str | None, timeout: float = 180.0) -> dict[str, Any]:
    """The body of a POST that must succeed (the scenario stops at the first that does not)."""
    status, answer = post(base, path, body, key=key, timeout=timeout)
    assert status == 200, f"{base}{path} answered {status}: {answer}"
    return dict(answer)


def stream(base: str, path: str, body: dict[str, Any], *, key: str, timeout: float = 120.0) -> tuple[int, list[Any]]:
    """(status, the SSE `data:` payloads, JSON-decoded but the final "[DONE]" kept as a string)."""
    status, raw = _request(base + path, body, key=key, timeout=timeout)
    chunks: list[Any] = []
    for line in raw.decode().splitlines():
        if line.startswith("data: "):
            payload = line[len("data: ") :]
            chunks.append(payload if payload == "[DONE]" else json.loads(payload))
    return status, chunks


def stream_started(
    base: str, body: dict[str, Any], *, key: str, started: threading.Event, tokens: int = 1
) -> dict[str, Any]:
    """A streamed completion that sets `started` at its `tokens`-th token chunk (1: the request is running;
    2: a decode step has run) and returns its usage: a trigger that does not depend on how fast /metrics
    answers a busy API server."""
    body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(), headers=headers)
    usage: dict[str, Any] = {}
    seen = 0
    with urllib.request.urlopen(req, timeout=180) as resp:
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data: ") :])
            seen += bool(chunk.get("choices"))
            if seen >= tokens:
                started.set()
            usage = chunk.get("usage") or usage
    return usage


def health(base: str) -> int:
    try:
        return _request(base + "/health", None, key=None, timeout=5.0)[0]
    except (OSError, TimeoutError):
        return 0


def snapshot(base: str) -> Snapshot:
    """Every `vllm:` sample but _created and _bucket, by (name, labels)."""
    status, raw = _request(base + "/metrics", None, key=None, timeout=10.0)
    assert status == 200, f"{base}/metrics answered {status}"
    out: Snapshot = {}
    for family in text_string_to_metric_families(raw.decode()):
        for sample in family.samples:
            if not sample.name.startswith("vllm:") or sample.name.endswith(("_created", "_bucket")):
                continue
            labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "le"))
            out[(sample.name, labels)] = sample.value
    return out


#: A family as the exposition declares it: (type, label names but `le`, a histogram's bucket bounds).
Family = tuple[str, tuple[str, ...], tuple[float, ...]]


def families(base: str) -> dict[str, Family]:
    """Every `vllm:` family by name (the parser folds X_total and X_created into their families)."""
    status, raw = _request(base + "/metrics", None, key=None, timeout=10.0)
    assert status == 200, f"{base}/metrics answered {status}"
    out = {}
    for family in text_string_to_metric_families(raw.decode()):
        if family.name.startswith("vllm:"):
            names = {k for s in family.samples for k in s.labels if k != "le"}
            bounds = {float(s.labels["le"]) for s in family.samples if "le" in s.labels}
            out[family.name] = (family.type, tuple(sorted(names)), tuple(sorted(bounds)))
    return out


def total(snap: Snapshot, name: str) -> float:
    return sum(v for (n, _), v in snap.items() if n == name)


# --- prompts ------------------------------------------------------------------------------------------


def prompt(seed: int, length: int) -> list[int]:
    """`length` token ids, distinct per seed from the first token on (ids 33-126: printable bytes)."""
    return [33 + (seed * 7919 + i * (seed % 89 + 1)) % 94 for i in range(length)]


#: Output restricted to the letters a-z (vLLM's `allowed_token_ids`): the real engine's dummy weights would
#: otherwise sample any byte, and a lone byte of a UTF-8 sequence decodes to "" (an empty first stream
#: chunk, an empty `delta: {}` on the finishing one): shapes would depend on the draw.
LETTERS = list(range(97, 123))


def completion(seed: int, length: int, max_tokens: int, **extra: Any) -> dict[str, Any]:
    body = {"model": MODEL, "prompt": prompt(seed, length), "max_tokens": max_tokens, "ignore_eos": True}
    return {**body, "allowed_token_ids": LETTERS, **extra}


# --- the scenario -------------------------------------------------------------------------------------

#: Step sizes: C4 outputs long enough to be seen running; the chunked prefill takes 128 steps of 256 (32 were
#: done in 0.4 s by the real engine on an idle machine, before the second snapshot could be taken).
C1_TOKENS = 64
C4_TOKENS = 512
PREFILL_PROMPT = 128 * 256 - 64
HANG_TOKENS = 1200  # streams that outlast the wait for every second token (times Target.outlast)
HANG_SECONDS = 3.0
#: Seconds between the two snapshots taken while the long prompt prefills.
PREFILL_GAP = 0.3


def wait_until(what: str, check: Callable[[], bool], *, timeout: float, interval: float = 0.05) -> float:
    t0 = time.monotonic()
    while not check():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
    return time.monotonic() - t0


def settle(base: str, *, timeout: float = 30.0) -> Snapshot:
    """A snapshot once running and waiting are 0 and two reads 0.3 s apart agree (the engine is idle)."""
    last: Snapshot = {}

    def idle() -> bool:
        nonlocal last
        first = snapshot(base)
        time.sleep(0.3)
        last = snapshot(base)
        return first == last and total(last, RUNNING) == 0 and total(last, WAITING) == 0

    wait_until(f"{base} idle", idle, timeout=timeout, interval=0.0)
    return last


def run(target: Target) -> Recording:
    """The whole scenario against one engine (idle, C1, C4, chunked prefill, hang, recovery, bodies)."""
    rec = Recording(target.name)
    pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix=f"fid-{target.name}")
    seeds = iter(range(1000, 2000))
    try:
        t0 = time.monotonic()
        _idle(rec, target)
        _c1(rec, target, next(seeds))
        rec.families = families(target.base)
        _c4(rec, target, pool, seeds)
        _chunked_prefill(rec, target, pool, next(seeds))
        _hang_and_recovery(rec, target, pool, seeds)
        _bodies(rec, target, next(seeds))
        rec.seconds["scenario"] = time.monotonic() - t0
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return rec


def _idle(rec: Recording, t: Target) -> None:
    step = rec.steps["idle"] = Step()
    step.snapshots["before"] = snapshot(t.base)
    time.sleep(2.0)
    step.snapshots["after"] = snapshot(t.base)


def _c1(rec: Recording, t: Target, seed: int) -> None:
    step = rec.steps["c1"] = Step()
    step.snapshots["before"] = settle(t.base)
    t0 = time.monotonic()
    body = ok(t.base, "/v1/completions", completion(seed, 64, C1_TOKENS), key=t.key)
    rec.seconds["c1"] = time.monotonic() - t0
    step.facts["completion_tokens"] = body["usage"]["completion_tokens"]
    step.snapshots["after"] = settle(t.base)


def _c4(rec: Recording, t: Target, pool: ThreadPoolExecutor, seeds: Iterator[int]) -> None:
    step = rec.steps["c4"] = Step()
    base = t.base
    step.snapshots["before"] = settle(base)
    t0 = time.monotonic()
    started = [threading.Event() for _ in range(4)]
    step.facts["asked"] = C4_TOKENS * t.outlast
    bodies = [completion(next(seeds), 64, step.facts["asked"]) for _ in range(4)]
    # a second token each: every stream has been through a decode step, so inter-token latencies were observed
    # (seen first-token-only on aissim, whose uncalibrated-for-CPU step is ~60 ms, when this waited for one)
    futures = [
        pool.submit(stream_started, base, b, key=t.key, started=e, tokens=2)
        for b, e in zip(bodies, started, strict=True)
    ]
    wait_until(
        "4 streams decoding", lambda: all(e.is_set() for e in started) or any(f.done() for f in futures), timeout=60
    )
    step.snapshots["during"] = snapshot(base)
    step.facts["done_when_seen_running"] = sum(f.done() for f in futures)
    results = [f.result(timeout=180) for f in futures]
    rec.seconds["c4"] = time.monotonic() - t0
    step.facts["completion_tokens"] = sorted(u["completion_tokens"] for u in results)
    step.snapshots["after"] = settle(base)


def _chunked_prefill(rec: Recording, t: Target, pool: ThreadPoolExecutor, seed: int) -> None:
    """One 32,704-token prompt through 128 chunks of 256 tokens: two snapshots while it prefills, one after."""
    step = rec.steps["prefill"] = Step()
    base = t.base
    step.snapshots["before"] = settle(base)
    t0 = time.monotonic()
    future = pool.submit(ok, base, "/v1/completions", completion(seed, PREFILL_PROMPT, 1), key=t.key)
    wait_until("the long prompt running", lambda: total(snapshot(base), RUNNING) == 1 or future.done(), timeout=60)
    step.snapshots["during"] = snapshot(base)
    time.sleep(PREFILL_GAP)
    step.snapshots["later"] = snapshot(base)
    step.facts["done_by_later"] = future.done()
    body = future.result(timeout=180)
    rec.seconds["prefill"] = time.monotonic() - t0
    step.facts["prompt_tokens"] = body["usage"]["prompt_tokens"]
    step.snapshots["after"] = settle(base)


def _hang_and_recovery(rec: Recording, t: Target, pool: ThreadPoolExecutor, seeds: Iterator[int]) -> None:
    """Two long requests running; the engine core hung; a third request sent into the hang; resumed."""
    base = t.base
    hang = rec.steps["hang"] = Step()
    recovery = rec.steps["recovery"] = Step()
    hang.snapshots["before"] = settle(base)
    started = [threading.Event() for _ in range(2)]
    hang.facts["asked"] = HANG_TOKENS * t.outlast
    bodies = [completion(next(seeds), 64, hang.facts["asked"]) for _ in range(2)]
    # a second token each before the hang, as in the C4 step: every stream has been through a decode step on both
    # engines, so whether inter-token latencies moved before the hang is not a race between their speeds
    running = [
        pool.submit(stream_started, base, b, key=t.key, started=e, tokens=2)
        for b, e in zip(bodies, started, strict=True)
    ]
    wait_until(
        "2 streams started", lambda: all(e.is_set() for e in started) or any(f.done() for f in running), timeout=60
    )
    t.hang()
    hang.facts["done_before_hang"] = sum(f.done() for f in running)
    time.sleep(0.5)  # outputs already on their way to the API server land before the frozen snapshot
    hang.snapshots["hung"] = snapshot(base)
    late = pool.submit(ok, base, "/v1/completions", completion(next(seeds), 64, 16), key=t.key)
    time.sleep(HANG_SECONDS)
    hang.snapshots["after"] = snapshot(base)
    hang.facts["health"] = health(base)
    hang.facts["done_while_hung"] = sum(f.done() for f in [*running, late])
    recovery.snapshots["before"] = hang.snapshots["after"]
    t0 = time.monotonic()
    t.resume()
    usages = [f.result(timeout=180) for f in running]
    late_body = late.result(timeout=180)
    rec.seconds["recovery"] = time.monotonic() - t0
    recovery.facts["completion_tokens"] = [u["completion_tokens"] for u in usages]
    recovery.facts["completion_tokens"].append(late_body["usage"]["completion_tokens"])
    recovery.facts["health"] = health(base)
    recovery.snapshots["after"] = settle(base)


def _bodies(rec: Recording, t: Target, seed: int) -> None:
    """The OpenAI answers whose shapes are compared: bodies, streams with usage, and errors."""
    base, key = t.base, t.key
    step = rec.steps["bodies"] = Step()
    step.snapshots["before"] = settle(base)
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "ignore_eos": True}
    chat["allowed_token_ids"] = LETTERS
    usage = {"stream": True, "stream_options": {"include_usage": True}}
    b = rec.bodies
    b["completion"] = post(base, "/v1/completions", completion(seed, 16, 8), key=key)
    b["chat"] = post(base, "/v1/chat/completions", chat, key=key)
    b["completion_stream"] = stream(base, "/v1/completions", completion(seed + 1, 16, 8, **usage), key=key)
    b["chat_stream"] = stream(base, "/v1/chat/completions", {**chat, **usage}, key=key)
    status, raw = _request(base + "/v1/models", None, key=key, timeout=10)
    b["models"] = (status, json.loads(raw))
    # max_model_len 327680: one token more than the context, as ids (the renderer refuses it, no engine step)
    b["over_length"] = post(base, "/v1/completions", completion(seed + 2, 327_681, 1), key=key)
    b["unknown_model"] = post(base, "/v1/completions", {**completion(seed + 3, 16, 8), "model": "nope"}, key=key)
    b["unknown_model_chat"] = post(base, "/v1/chat/completions", {**chat, "model": "nope"}, key=key)
    b["bad_key"] = post(base, "/v1/completions", completion(seed + 4, 16, 8), key="not-the-key")
    b["no_key"] = post(base, "/v1/completions", completion(seed + 5, 16, 8), key=None)
    step.snapshots["after"] = settle(base)


def run_both(targets: list[Target]) -> dict[str, Recording]:
    """The scenario against every target at once (each in a thread of its own; they share nothing)."""
    out: dict[str, Recording] = {}
    errors: list[BaseException] = []

    def one(t: Target) -> None:
        try:
            out[t.name] = run(t)
        except BaseException as exc:  # reported, with the engine's name and state, after both have finished
            errors.append(AssertionError(f"{t.name}: {exc!r}\n{t.state()}"))
            errors[-1].__cause__ = exc

    threads = [threading.Thread(target=one, args=(t,), name=f"scenario-{t.name}") for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return out


# --- comparison ---------------------------------------------------------------------------------------


def direction(before: float, after: float) -> str:
    if after > before:
        return "up"
    return "down" if after < before else "flat"


def shape(value: Any) -> Any:
    """A JSON value's field names, types and nesting, without its values (a list: the set of its items'
    shapes, so 3 choices and 1 choice, or a 5- and an 8-token stream, have one shape)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        shapes: list[Any] = []
        for item in value:
            if (s := shape(item)) not in shapes:
                shapes.append(s)
        return shapes
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return type(value).__name__
    return type(value).__name__
