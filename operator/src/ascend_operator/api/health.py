"""`spec.health`: every window, threshold, period and limit of the health machinery, with its reason.

Defaults come from the seed (FACTS.md) and are justified next to each field; tests shorten them. The
machinery itself is in `ascend_operator.health` (pure policies) and `ascend_operator.clients.engine` (I/O).
One rule lives here, `HealthSpec.in_startup_grace`: both the health loop and the disruption decision read
it, and this is the layer both may import.
"""

from pydantic import Field

from ascend_operator.api.base import ApiModel


class CanarySpec(ApiModel):
    """The generation canary: a few prompt tokens, 1-8 output tokens, a strict timeout."""

    prompt: str = Field(
        default="Reply with OK.", min_length=1, max_length=256, description="A short prompt (a few tokens)."
    )
    max_tokens: int = Field(default=4, ge=1, le=8, description="Output tokens asked for (1-8, ignore_eos).")
    timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        le=120,
        description="Time for the tokens to come back. The seed's C1 TTFT is 0.45 s and TPOT 14-23 ms, so an "
        "idle healthy engine answers 4 tokens in ~0.5 s; 10 s leaves room for a queue of short requests.",
    )
    period_seconds: float = Field(default=10.0, gt=0, le=600, description="Seconds between canaries per pod.")
    failure_threshold: int = Field(
        default=3, ge=1, le=20, description="Consecutive failures without forward progress that make a pod unready."
    )


class StallSpec(ApiModel):
    """Stall detection: requests running and no forward progress."""

    window_seconds: float = Field(
        default=30.0,
        gt=0,
        description="No progress for this long is a stall. The slowest healthy step in the seed is a 8192-token "
        "prefill chunk at ~512K context (148.76 s / 64 chunks ~ 2.3 s); 30 s is >10x that, and with a 5 s "
        "scrape keeps detection inside the 45 s target.",
    )
    kv_evidence_threshold: float = Field(
        default=0.975,
        gt=0,
        le=1,
        description="KV usage at which a stall is strong evidence of the seed's 512K failure (KV climbed to "
        "97.5%, then forward progress stopped). Recorded as evidence; it does not fire on its own.",
    )


class DriftSpec(ApiModel):
    """Drift detection: engine step time at comparable batch sizes against a per-pod baseline."""

    enabled: bool = Field(default=True, description="Roll pods whose step time drifts up.")
    threshold: float = Field(
        default=0.10,
        gt=0,
        lt=1,
        description="Step-time increase that counts as drift. The seed lost ~18% after a long uptime; fixed-"
        "length runs are reproducible to 2-3% (FACTS.md pitfall 3), so 10% is well clear of noise.",
    )
    warmup_seconds: float = Field(
        default=300.0, ge=0, description="Ignore the first minutes after Ready (graph warm-up, cold caches)."
    )
    sample_window_seconds: float = Field(
        default=30.0, gt=0, description="Step time is averaged over windows of this length while the engine is busy."
    )
    baseline_windows: int = Field(
        default=4, ge=1, le=100, description="Busy windows per batch-size bucket that form its baseline."
    )
    sustain_seconds: float = Field(
        default=180.0,
        gt=0,
        description="The median ratio over this span must exceed the threshold: the seed's 18% at constant load "
        "is caught within 10 minutes, a single slow window is not.",
    )


class RollSpec(ApiModel):
    """Limits on recreating pods: rolls never storm."""

    max_per_hour: int = Field(default=3, ge=0, le=60, description="Rolls per service per hour (0: never roll).")
    cooldown_seconds: float = Field(
        default=600.0, ge=0, description="Minimum time between two rolls of one service (a reload takes minutes)."
    )


class RecycleSpec(ApiModel):
    """Scheduled recycling: the seed's remedy for long-uptime drift (a container restart restored it)."""

    max_age_hours: float | None = Field(
        default=None, gt=0, description="Recreate a pod older than this, inside the maintenance window. Unset: off."
    )
    window_start_utc: str = Field(
        default="02:00", pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$", description="Maintenance window start (HH:MM UTC)."
    )
    window_minutes: int = Field(default=120, ge=1, le=1440, description="Maintenance window length.")


class HealthSpec(ApiModel):
    """How the operator judges engines."""

    startup_grace_seconds: float = Field(
        default=1800.0,
        ge=0,
        description="No judgement before this many seconds after a pod starts: ~292 GB of weights load for "
        "minutes (75 shards), then graphs are captured; 30 min also covers slow shared storage.",
    )
    scrape_interval_seconds: float = Field(default=5.0, gt=0, le=300, description="Seconds between /metrics scrapes.")
    scrape_timeout_seconds: float = Field(
        default=3.0, gt=0, le=60, description="Per-pod scrape timeout; one slow pod never delays another."
    )
    canary: CanarySpec = Field(default_factory=CanarySpec, description="The generation canary.")
    stall: StallSpec = Field(default_factory=StallSpec, description="Stall detection.")
    drift: DriftSpec = Field(default_factory=DriftSpec, description="Drift detection.")
    rolls: RollSpec = Field(default_factory=RollSpec, description="Roll limits.")
    recycle: RecycleSpec = Field(default_factory=RecycleSpec, description="Scheduled recycling.")
    node_lost_seconds: float = Field(
        default=180.0,
        ge=0,
        le=3600,
        description="A pod whose node is unreachable (Ready False or Unknown, the unreachable taint, or its "
        "Lease expired) and whose engine does not answer is force-deleted (NodeLost) this long after the node "
        "went silent, and its successor kept off the node: no kubelet will ever confirm its deletion, so it "
        "would keep its replica slot forever. 180 s: a kubelet restart or a short network blip renews the "
        "Lease within a few of its 10 s renewals, the node controller itself calls a node Unknown only after "
        "50 s (node-monitor-grace-period), and 3 minutes is still well before the 300 s after which Kubernetes "
        "evicts (gracefully, which never completes on a silent node). 0: give up as soon as it is seen.",
    )

    def in_startup_grace(self, started_at: float | None, *, served: bool, now: float) -> bool:
        """The one startup-grace rule: never Ready and started less than `startupGraceSeconds` ago (a pod
        without a start time has not started: inside). The health loop reports such an engine as loading
        and the disruption decision refuses to roll it (InStartupGrace); both ask here, so they agree on
        when loading ends. Here, on the model both layers read, because disruption/ may not import health/.
        Times are epoch seconds."""
        loading = started_at is None or now - started_at < self.startup_grace_seconds
        return loading and not served
