"""A router per service: vllm-router 0.1.17 (the vLLM project's Rust router) in front of the engine pods.

Why a router: the ClusterIP Service balances connections, not requests, and knows nothing of prefixes or
of how full an engine is. vllm-router picks an engine per request (cache-aware, power-of-two, ...), retries
and trips a circuit breaker per engine, and holds requests in its own bounded queue once a concurrency
budget is spent, so overload waits (or gets a 429) at the router instead of piling up in the engines.

Every field is a vllm-router 0.1.17 option, named as its launcher declares it, with the router's own
default (vllm_router 0.1.17 sdist, py_src/vllm_router/router_args.py: the `RouterArgs` dataclass, lines
10-105, and `vllm-router --help`), except where a description says why the operator differs. The
operator renders `--service-discovery` with the service's serving selector, so which engines the router
sees is not the user's to choose. docs/router.md says what the router protects and where it does not.
"""

from enum import StrEnum
from typing import Annotated

from pydantic import Field

from ascend_operator.api.base import ApiModel
from ascend_operator.api.formats import ImageReference

#: The Kubernetes quantity pattern of api/spec.py (kept here: spec imports this module).
QUANTITY = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$"
RouterQuantity = Annotated[str, Field(pattern=QUANTITY, max_length=32)]


class RouterPolicy(StrEnum):
    """`--policy`, spelt as vllm-router 0.1.17's CLI spells it (`--help`: choices of --policy).

    `kv_aware` is the router's seventh choice and is left out: it learns engine caches from
    `/get_server_info` and `/kv_event_sources` (vllm-router src/kv_index/discovery.rs:1), which vLLM 0.25.1
    serves on no route, so the operator could not feed it.
    """

    CACHE_AWARE = "cache_aware"
    POWER_OF_TWO = "power_of_two"
    CONSISTENT_HASH = "consistent_hash"
    ROUND_ROBIN = "round_robin"
    RANDOM = "random"
    STICKY_LEAST_LOADED = "sticky_least_loaded"


class RouterRetries(ApiModel):
    """Retries of a failed engine request on another pick (`--retry-*`, `--disable-retries`)."""

    enabled: bool = Field(
        default=True,
        description="false renders `--disable-retries` (one attempt, router_args.py: 'equivalent to setting "
        "retry_max_retries=1') and none of the numbers below.",
    )
    max_retries: int = Field(
        default=5, ge=1, le=20, description="`--retry-max-retries` (router default 5, router_args.py:88)."
    )
    initial_backoff_ms: int = Field(
        default=50,
        ge=1,
        le=60_000,
        description="`--retry-initial-backoff-ms` (router default 50, router_args.py:89).",
    )
    max_backoff_ms: int = Field(
        default=30_000,
        ge=1,
        le=600_000,
        description="`--retry-max-backoff-ms` (router default 30000, router_args.py:90).",
    )
    backoff_multiplier: float = Field(
        default=1.5,
        ge=1,
        le=10,
        description="`--retry-backoff-multiplier` (router default 1.5, router_args.py:91).",
    )
    jitter_factor: float = Field(
        default=0.2,
        ge=0,
        le=1,
        description="`--retry-jitter-factor` (router default 0.2, router_args.py:92).",
    )


class RouterCircuitBreaker(ApiModel):
    """The per-engine circuit breaker (`--cb-*`, `--disable-circuit-breaker`)."""

    enabled: bool = Field(
        default=True,
        description="false renders `--disable-circuit-breaker` (router_args.py: 'equivalent to setting "
        "cb_failure_threshold to u32::MAX') and none of the numbers below.",
    )
    failure_threshold: int = Field(
        default=10,
        ge=1,
        le=10_000,
        description="`--cb-failure-threshold`: failures in the window that open an engine's breaker (router "
        "default 10, router_args.py:101).",
    )
    success_threshold: int = Field(
        default=3,
        ge=1,
        le=10_000,
        description="`--cb-success-threshold`: successes that close it again (router default 3, router_args.py:102).",
    )
    timeout_seconds: int = Field(
        default=60,
        ge=1,
        le=3600,
        description="`--cb-timeout-duration-secs`: how long an open breaker keeps the engine out before a "
        "trial (router default 60, router_args.py:103).",
    )
    window_seconds: int = Field(
        default=120,
        ge=1,
        le=3600,
        description="`--cb-window-duration-secs`: the window failures are counted in (router default 120, "
        "router_args.py:104).",
    )


class RouterAdmission(ApiModel):
    """The router's admission: a token bucket of maxConcurrentRequests tokens, a bounded queue behind it."""

    max_concurrent_requests: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="`--max-concurrent-requests` of each router replica. Unset: the engines' running slots "
        "(engine replicas x parallelism.data x engine.maxNumSeqs) divided among the router replicas, so "
        "requests beyond what the engines can run wait in the router's queue instead of the engines' (the "
        "router's own default is 32768, router_args.py:78). A token is held until the engine's response "
        "headers arrive, so a streamed request stops counting once it starts streaming (docs/router.md).",
    )
    queue_size: int = Field(
        default=0,
        ge=0,
        le=100_000,
        description="`--queue-size`: requests that may wait for a token. 0 (the operator's default; the router's "
        "is 100, router_args.py:80): a request beyond the budget gets 429 with Retry-After at once. In vllm-router "
        "0.1.17 the queue does not hold what its flags say: its processor hands every entry to a task of its own "
        "at once (src/middleware.rs:424-457), so the queue never fills and never answers 429, and each waiter "
        "gives up with 408 after one token's refill time (src/core/token_bucket.rs:86-121), about 1 s at the "
        "rendered refill, not after queueTimeoutSeconds (measured: tests/e2e/test_router.py).",
    )
    queue_timeout_seconds: int = Field(
        default=60,
        ge=1,
        le=3600,
        description="`--queue-timeout-secs`: a queued request gets 408 after this long at the latest. Router "
        "default 60 (router_args.py:82); in 0.1.17 the token bucket's own wait ends it sooner (queueSize).",
    )
    refill_per_second: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="`--rate-limit-tokens-per-second`: tokens the bucket regains per second on top of the "
        "ones finished requests return. Unset: 1, the least the bucket takes (src/core/token_bucket.rs:36-41 "
        "turns 0 into 1), so the budget acts as a concurrency cap; the router's own default, "
        "maxConcurrentRequests per second (src/server.rs:78), would admit that many more each second "
        "whatever is still running.",
    )


class RouterResources(ApiModel):
    """CPU and memory of the router container."""

    requests: dict[str, RouterQuantity] = Field(
        default_factory=dict,
        max_length=8,
        description="Resource requests. Unset: cpu 1, memory 1Gi (not measured: the cache-aware tree keeps up "
        "to --max-tree-size, 2^25 characters, per engine, router_args.py:44).",
    )
    limits: dict[str, RouterQuantity] = Field(
        default_factory=dict,
        max_length=8,
        description="Resource limits. Unset memory: the memory request; unset cpu: no limit (throttling a "
        "proxy adds latency to every request).",
    )


class RouterSpec(ApiModel):
    """A vllm-router Deployment in front of the service's engine pods, with its Service and RBAC."""

    image: ImageReference = Field(
        description="Image that has vllm-router 0.1.17 on its PATH (the operator runs `vllm-router` with "
        "0.1.17's flags). No default: the vLLM project publishes docker.io/vllm/vllm-router (built from the "
        "router repository's docker/Dockerfile.router, per its README) but which tag carries 0.1.17 is "
        "not verified here; `pip install vllm-router==0.1.17` in a python:3.11-slim image is one.",
    )
    image_pull_policy: str = Field(
        default="IfNotPresent", pattern=r"^(Always|IfNotPresent|Never)$", description="Image pull policy."
    )
    replicas: int = Field(
        default=1,
        ge=1,
        le=16,
        description="Router pods. 1 by default: each replica keeps its own cache-aware prefix tree and its own "
        "admission bucket, so two replicas behind one Service halve the prefix hits and split the budget; a "
        "router restarts in seconds (no model to load), the engines behind it take minutes. More replicas "
        "buy availability at that price; the derived maxConcurrentRequests is divided among them.",
    )
    port: int = Field(
        default=30000,
        ge=1,
        le=65535,
        description="`--port` the router serves the OpenAI API on and its Service exposes (router default "
        "30000, router_args.py:14).",
    )
    policy: RouterPolicy = Field(
        default=RouterPolicy.CACHE_AWARE,
        description="`--policy`: how an engine is picked per request (router default cache_aware, router_args.py:26).",
    )
    retries: RouterRetries = Field(default_factory=RouterRetries, description="Retries on another engine.")
    circuit_breaker: RouterCircuitBreaker = Field(
        default_factory=RouterCircuitBreaker, description="The per-engine circuit breaker."
    )
    request_timeout_seconds: int = Field(
        default=1800,
        ge=1,
        le=86_400,
        description="`--request-timeout-secs`: the longest a request may take end to end (router default "
        "1800, router_args.py:76); a long-context generation must fit in it.",
    )
    admission: RouterAdmission = Field(
        default_factory=RouterAdmission, description="Concurrency budget and queue in front of the engines."
    )
    resources: RouterResources = Field(default_factory=RouterResources, description="CPU and memory.")
