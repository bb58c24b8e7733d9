"""`aisctl bench {sweep,prefill,mixed,ab}`: the seed's benchmark protocol against any OpenAI endpoint.

Why this module exists: it is the command-line face of ascend_operator.bench. It parses the scenario's
knobs, runs it, writes result.json, result.md and result.png into --out, prints the Markdown table on
stdout and exits 0 only on PASS (1 on FAIL, whatever failed: a request, a rule, an incomplete result,
an unreachable engine), so a pipeline can never mistake a failed run for a result.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any

import aiohttp

from ascend_operator.bench import scenarios
from ascend_operator.bench.client import Endpoint
from ascend_operator.bench.prompts import parse_tokens
from ascend_operator.bench.report import SCHEMA, finalize, markdown
from ascend_operator.bench.rules import Thresholds
from ascend_operator.bench.runner import Target, open_target, tqdm_progress
from ascend_operator.bench.targets import Url, ais_info, service_urls

EXIT_FAIL = 1


def _ints(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers separated by commas: {text!r}")
    return values


def _tokens(text: str) -> int:
    try:
        return parse_tokens(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _token_list(text: str) -> list[int]:
    return [_tokens(v) for v in text.split(",") if v.strip()]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="served model name (default: the first of /v1/models)")
    p.add_argument("--seed", type=int, help="prompt seed (default: random; reusing one reuses every prompt)")
    p.add_argument("--out", type=Path, help="directory for result.json/.md/.png (default: bench-results/...)")
    p.add_argument("--timeout", type=float, default=3600.0, help="per-request timeout, wall seconds")
    p.add_argument("--cache-threshold", type=float, default=0.01, help="max prefix-cache hit fraction")
    p.add_argument("--length-tolerance", type=float, default=0.05, help="max prompt length error (fraction)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")


def _add_workload(p: argparse.ArgumentParser, *, long_context: int) -> None:
    """The mixed workload's knobs: 1 x long beside N short closed-loop workers."""
    p.add_argument("--long-context", type=_tokens, default=long_context)
    p.add_argument("--long-output", type=_tokens, default=1024)
    p.add_argument("--short", type=int, default=31, help="short workers beside the long request")
    p.add_argument("--short-rounds", type=int, default=2)
    p.add_argument("--short-input", type=_tokens, default=1024)
    p.add_argument("--short-output", type=_tokens, default=256)
    p.add_argument(
        "--baseline",
        action="store_true",
        help="first run the long request alone and the short workers alone: the references of the seed's criteria",
    )


def _urls(text: str) -> tuple[str, ...]:
    return tuple(u.strip() for u in text.split(",") if u.strip())


def add_parser(sub: Any) -> None:
    bench = sub.add_parser("bench", help="benchmark an OpenAI endpoint with the seed's four rules built in")
    kinds = bench.add_subparsers(dest="scenario", required=True)
    sweep = kinds.add_parser("sweep", help="concurrency sweep with fixed input/output lengths")
    sweep.add_argument("--concurrency", type=_ints, default=[1, 8, 32, 64])
    sweep.add_argument("--input-tokens", type=_tokens, default=1024)
    sweep.add_argument("--output-tokens", type=_tokens, default=512)
    sweep.add_argument("--rounds", type=int, default=2, help="requests per worker at each concurrency")
    prefill = kinds.add_parser("prefill", help="clean prefill scan by context length at concurrency 1")
    prefill.add_argument("--contexts", type=_token_list, default=[8192, 32768, 65536])
    prefill.add_argument("--output-tokens", type=_tokens, default=16)
    prefill.add_argument("--rounds", type=int, default=1, help="fresh prompts per context length")
    mixed = kinds.add_parser("mixed", help="1 x long context beside N short requests (the acceptance workload)")
    _add_workload(mixed, long_context=300 * 1024)
    mixed.add_argument(
        "--long-url",
        help="send the long request to this engine instead (length-aware routing); its /metrics are scraped too",
    )
    mixed_ab = kinds.add_parser(
        "mixed-ab", help="the mixed workload on two endpoints in one session (e.g. aggregated vs prefill/decode)"
    )
    for side in ("a", "b"):
        mixed_ab.add_argument(f"--url-{side}", required=True, help=f"base URL of endpoint {side.upper()}")
        mixed_ab.add_argument(f"--label-{side}", default=side.upper())
        mixed_ab.add_argument(
            f"--long-url-{side}", help=f"endpoint {side.upper()}'s engine for the long request (length-aware routing)"
        )
        mixed_ab.add_argument(
            f"--metrics-{side}",
            type=_urls,
            default=(),
            help="comma-separated engine URLs whose /metrics count this endpoint's requests (behind a router: "
            "its engines; with prefill/decode: the decode engines, which count every prompt and output token)",
        )
    mixed_ab.add_argument("--rounds", type=int, default=2, help="rounds per endpoint, interleaved")
    _add_workload(mixed_ab, long_context=256 * 1024)
    ab = kinds.add_parser("ab", help="A/B of two endpoints in one session, interleaved rounds")
    ab.add_argument("--url-a", required=True)
    ab.add_argument("--url-b", required=True)
    ab.add_argument("--label-a", default="A")
    ab.add_argument("--label-b", default="B")
    ab.add_argument("--concurrency", type=int, default=32)
    ab.add_argument("--input-tokens", type=_tokens, default=1024)
    ab.add_argument("--output-tokens", type=_tokens, default=512)
    ab.add_argument("--rounds", type=int, default=4)
    for p in (sweep, prefill, mixed):
        where = p.add_mutually_exclusive_group(required=True)
        where.add_argument("--url", help="base URL of an OpenAI-compatible server (vLLM, aissim)")
        where.add_argument("--service", help="an AscendInferenceService: measure each engine pod, then its Service")
        p.add_argument("-n", "--namespace", default="default", help="namespace of --service")
        p.add_argument("--kubeconfig", help="kubeconfig for --service (default: $KUBECONFIG, ~/.kube/config)")
        p.add_argument("--pods-only", action="store_true", help="with --service: skip the Service's cluster IP")
    for p in (sweep, prefill, mixed, ab, mixed_ab):
        _common(p)
    bench.set_defaults(func=cmd_bench)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


async def _resolve_service(args: argparse.Namespace, doc: dict[str, Any]) -> list[Url]:
    """The AIS's engine pods and Service through the kubeconfig, and the spec hash it renders."""
    from ascend_operator.api.parse import parse_resource
    from ascend_operator.clients.kube import KubeApi, load_config
    from ascend_operator.clients.resources import SERVICE, SERVICE_CR, service_pods
    from ascend_operator.render.pod import spec_hash

    load_config(args.kubeconfig or os.environ.get("KUBECONFIG"))
    kube = KubeApi()
    ais = await kube.get(SERVICE_CR, args.namespace, args.service)
    if ais is None:
        raise RuntimeError(f"AscendInferenceService {args.namespace}/{args.service} not found")
    spec = parse_resource(ais).spec
    pods = await service_pods(kube, args.namespace, args.service)
    service = None if args.pods_only else await kube.get(SERVICE, args.namespace, args.service)
    doc["ais"] = ais_info(name=args.service, namespace=args.namespace, spec_hash=spec_hash(spec), pods=pods)
    urls = service_urls(pods=pods, service=service, default_port=spec.engine.port)
    if not urls:
        raise RuntimeError(f"AscendInferenceService {args.namespace}/{args.service} has no running pod with an IP")
    return urls


async def _scenario(args: argparse.Namespace, t: Target, common: scenarios.Common, doc: dict[str, Any]) -> None:
    if args.scenario == "sweep":
        doc["points"] += await scenarios.sweep(
            t,
            common,
            concurrencies=args.concurrency,
            inp=args.input_tokens,
            out=args.output_tokens,
            rounds=args.rounds,
        )
    elif args.scenario == "prefill":
        doc["points"] += await scenarios.prefill(
            t, common, contexts=args.contexts, out=args.output_tokens, rounds=args.rounds
        )
    else:
        long_target = None
        if args.long_url:
            long_target = await open_target(
                Endpoint(t.endpoint.session, args.long_url, f"{t.endpoint.label}-long", timeout_s=args.timeout),
                args.model,
            )
        points, summary = await scenarios.mixed(
            t, common, _workload(args), long_target=long_target, baseline=args.baseline
        )
        doc["points"] += points
        doc.setdefault("mixed", {})[t.endpoint.label] = summary


def _with(metrics: tuple[str, ...], url: str, long_url: str | None) -> tuple[str, ...]:
    """The engines whose counters an endpoint's requests move: without --metrics, the endpoint and the long
    request's engine (with --metrics, those engines count both: e.g. a decode engine shared by two routers)."""
    if not long_url or metrics:
        return metrics
    return (url, long_url)


def _workload(args: argparse.Namespace) -> scenarios.Mix:
    keys = ("long_context", "long_output", "short", "short_rounds", "short_input", "short_output")  # not --baseline
    return scenarios.Mix(**{key: getattr(args, key) for key in keys})


async def _measure(args: argparse.Namespace, common: scenarios.Common, doc: dict[str, Any]) -> None:
    if args.scenario == "ab":
        urls = [Url(args.label_a, args.url_a, ()), Url(args.label_b, args.url_b, ())]
    elif args.scenario == "mixed-ab":
        urls = [
            Url(args.label_a, args.url_a, _with(args.metrics_a, args.url_a, args.long_url_a)),
            Url(args.label_b, args.url_b, _with(args.metrics_b, args.url_b, args.long_url_b)),
        ]
    elif args.scenario == "mixed" and args.url and args.long_url:
        urls = [Url("engine", args.url, (args.url, args.long_url))]
    elif args.service:
        urls = await _resolve_service(args, doc)
    else:
        urls = [Url("engine", args.url, ())]
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        targets: list[Target] = []
        for u in urls:
            endpoint = Endpoint(session, u.url, u.label, timeout_s=args.timeout, metrics_urls=u.metrics_urls)
            target = await open_target(endpoint, args.model)
            targets.append(target)
            doc["endpoints"][u.label] = {**target.info, "model": target.model}
        if args.scenario == "ab":
            doc["points"], doc["ab"] = await scenarios.ab(
                targets[0],
                targets[1],
                common,
                concurrency=args.concurrency,
                inp=args.input_tokens,
                out=args.output_tokens,
                rounds=args.rounds,
            )
        elif args.scenario == "mixed-ab":
            longs: dict[str, Target] = {}
            sides = ((args.long_url_a, args.metrics_a), (args.long_url_b, args.metrics_b))
            for t, (url, metrics) in zip(targets, sides, strict=True):
                if url:  # behind a router, the engines named by --metrics count the long request too
                    ep = Endpoint(
                        session, url, f"{t.endpoint.label}-long", timeout_s=args.timeout, metrics_urls=metrics
                    )
                    longs[t.endpoint.label] = await open_target(ep, args.model)
            doc["points"], doc["mixed_ab"] = await scenarios.mixed_ab(
                targets[0],
                targets[1],
                common,
                _workload(args),
                rounds=args.rounds,
                long_targets=longs,
                baseline=args.baseline,
            )
        else:
            for target in targets:  # each engine pod, then the Service
                await _scenario(args, target, common, doc)
        for target in targets:
            doc["endpoints"][target.endpoint.label]["calibration"] = {
                "chars_per_token": round(target.chars_per_token, 4),
                "probes": target.calibration,
            }


def parameters(args: argparse.Namespace) -> dict[str, Any]:
    skip = {"func", "command", "scenario", "out", "no_progress", "seed", "model", "service", "namespace", "kubeconfig"}
    return {k: v for k, v in sorted(vars(args).items()) if k not in skip and not k.startswith(("url", "label"))}


def run(args: argparse.Namespace) -> dict[str, Any]:
    seed = args.seed if args.seed is not None else secrets.randbits(48)
    thresholds = Thresholds(cache=args.cache_threshold, length=args.length_tolerance)
    common = scenarios.Common(seed=seed, thresholds=thresholds, progress=None if args.no_progress else tqdm_progress)
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "scenario": args.scenario,
        "seed": seed,
        "command": ["aisctl", "bench", *sys.argv[2:]] if sys.argv[1:2] == ["bench"] else None,
        "parameters": parameters(args),
        "ais": None,
        "started_at": _now(),
        "endpoints": {},
        "points": [],
    }
    errors: list[dict[str, Any]] = []
    try:
        asyncio.run(_measure(args, common, doc))
    except Exception as exc:  # any failure is a FAIL result with its reason, never a traceback and exit 0
        errors.append({"name": "run_completed", "ok": False, "detail": f"{type(exc).__name__}: {exc}"})
    doc["finished_at"] = _now()
    return finalize(doc, errors)


def write_outputs(doc: dict[str, Any], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "result.json", out / "result.md"]
    written[0].write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    written[1].write_text(markdown(doc), encoding="utf-8")
    if doc["points"]:
        try:
            from ascend_operator.bench.plot import write_plot
        except ImportError as exc:  # the optional `bench` extra is not installed
            print(f"warning: no plot ({exc}); install ascend-inference-operator[bench]", file=sys.stderr)
        else:
            from ascend_operator.bench.plot import write_timeline

            write_plot(doc, out / "result.png")
            written.append(out / "result.png")
            if write_timeline(doc, out / "timeline.png"):
                written.append(out / "timeline.png")
            if doc.get("mixed_ab"):
                from ascend_operator.bench.compare import write_plot as write_comparison

                write_comparison(doc["mixed_ab"], out / "comparison.png", title="aisctl bench mixed-ab")
                written.append(out / "comparison.png")
    return written


def cmd_bench(args: argparse.Namespace) -> int:
    doc = run(args)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or Path("bench-results") / f"{args.scenario}-{stamp}"
    written = write_outputs(doc, out)
    sys.stdout.write(markdown(doc))
    print(f"bench {args.scenario}: {doc['verdict']}; wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    if doc["verdict"] != "PASS":
        print(f"bench {args.scenario}: FAIL: {', '.join(doc['failed'])}", file=sys.stderr)
        return EXIT_FAIL
    return 0
