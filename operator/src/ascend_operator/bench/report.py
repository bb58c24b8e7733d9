"""The result document, its completeness rule, the verdict and the Markdown table (pure).

Why this module exists: the seed's fourth rule is that PASS needs the result JSON, the successful request
count and the engine's completion state, never a shell exit code (docs/FACTS.md pitfall 4: `cmd | tee | grep
|| true` hid failed runs). The verdict is computed here from the document itself: a result with a missing
figure is incomplete and FAILs like a failed request does. The schema is described in
`ascend_operator.bench` (the package docstring) and docs/benchmarking.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ascend_operator.bench import acceptance
from ascend_operator.bench.compare import table

SCHEMA = "bench.ascend.dev/v1"

_POINT_REQUIRED = (
    ("output_tok_s",),
    ("engine", "ttft_mean_s"),
    ("engine", "finished"),
    ("engine", "prefix_cache_hit_rate"),
    ("client", "ttft_mean_s"),
    ("lengths", "prompt_tokens_mean"),
)
_TOP_REQUIRED = ("schema", "scenario", "seed", "endpoints", "points", "started_at", "finished_at")


def _get(doc: Mapping[str, Any], path: Sequence[str]) -> Any:
    value: Any = doc
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def missing_fields(doc: Mapping[str, Any]) -> list[str]:
    """Every required field of the result that is absent or null."""
    missing = [key for key in _TOP_REQUIRED if doc.get(key) is None]
    points = doc.get("points") or []
    if not points:
        missing.append("points (none measured)")
    for i, point in enumerate(points):
        required = list(_POINT_REQUIRED)
        if max(_get(point, ("lengths", "completion_tokens_requested")) or [0]) > 1:
            required.append(("engine", "tpot_mean_s"))
        missing += [f"points[{i}].{'.'.join(path)}" for path in required if _get(point, path) is None]
    for label, endpoint in (doc.get("endpoints") or {}).items():
        if not endpoint.get("models"):
            missing.append(f"endpoints.{label}.models")
    return missing


def finalize(doc: dict[str, Any], scenario_checks: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """Add the completeness check and the verdict: PASS only when every check of every point and of the
    scenario holds and nothing is missing."""
    missing = missing_fields(doc)
    complete = {
        "name": "result_complete",
        "ok": not missing,
        "detail": "every required field present" if not missing else f"missing: {', '.join(missing[:6])}",
    }
    all_checks = [*scenario_checks, complete]
    failed = [c["name"] for c in all_checks if not c["ok"]]
    failed += [f"{p['label']}:{c['name']}" for p in doc.get("points", []) for c in p["checks"] if not c["ok"]]
    return {**doc, "checks": list(all_checks), "failed": failed, "verdict": "FAIL" if failed else "PASS"}


def _fmt(value: Any, unit: str = "", scale: float = 1.0, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value * scale:.{digits}f}{unit}"


def markdown(doc: Mapping[str, Any]) -> str:
    """One row per point: engine figures first, the client's beside them, the point's own verdict."""
    header = (
        "| endpoint | point | C | prompt tok (measured) | out tok | output tok/s | engine TTFT mean / p99 | "
        "engine TPOT | client TTFT | client TPOT | cache hit | KV peak | preempt | checks |"
    )
    rows = [header, "|" + "---|" * (header.count("|") - 1)]
    for p in doc.get("points", []):
        e, c, n = p["engine"], p["client"], p["lengths"]
        rows.append(
            "| "
            + " | ".join(
                [
                    p["endpoint"],
                    p["label"],
                    str(p["concurrency"]),
                    _fmt(n["prompt_tokens_mean"], digits=0),
                    ",".join(str(v) for v in n["completion_tokens_requested"]),
                    _fmt(p["output_tok_s"], digits=1),
                    f"{_fmt(e['ttft_mean_s'], ' s')} / {_fmt(e['ttft_p99_s'], ' s')}",
                    _fmt(e["tpot_mean_s"], " ms", 1000, 1),
                    _fmt(c["ttft_mean_s"], " s"),
                    _fmt(c["tpot_mean_s"], " ms", 1000, 1),
                    _fmt(e["prefix_cache_hit_rate"], "%", 100, 1),
                    _fmt(e["kv_peak"], "%", 100, 1),
                    str(e["preemptions"]) if e["preemptions"] is not None else "-",
                    "ok" if p["ok"] else "FAIL: " + ", ".join(x["name"] for x in p["checks"] if not x["ok"]),
                ]
            )
            + " |"
        )
    lines = [*rows, "", f"**{doc.get('verdict', '?')}** ({doc.get('scenario')}, seed {doc.get('seed')})"]
    if doc.get("mixed_ab"):
        lines += ["", table(doc["mixed_ab"])]
    for label, summary in (doc.get("mixed") or {}).items():
        lines += ["", *acceptance.lines(label, summary)]
    for check in doc.get("checks", []):
        lines.append(f"- {'ok' if check['ok'] else 'FAIL'} {check['name']}: {check['detail']}")
    return "\n".join(lines) + "\n"
