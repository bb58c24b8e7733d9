"""What the chaos soak (perf/soak.py) sees while it runs: the services' pods, the operator's verdicts on them,
its roll records, and the clients' requests.

Why a watcher of its own instead of asking per fault: faults overlap, the API server is restarted under the
run, and a roll the soak did not cause is only noticed if every pod that ever existed and every roll record
that was ever written are kept. The watcher polls the API every second (a failed poll, as during an API
server restart, keeps the last picture); the clients talk to the pods' own IPs, as a router would, so an API
server outage costs them nothing and a lost request means a pod was taken away or its engine failed.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from kubernetes import client, config

from ascend_operator.api.constants import GROUP, LABEL_SERVICE, PLURAL, READINESS_GATE, VERSION

#: The example's served model (examples/dsv4-flash.yaml) and engine port.
MODEL = "deepseek-v4-flash"
ENGINE_PORT = 8000


@dataclass
class PodSeen:
    """One engine pod as last seen."""

    service: str
    name: str
    uid: str
    node: str
    ip: str
    gate: str  # the operator's readiness gate, "True"/"False"/"" (not set yet)
    ready: bool  # the pod's Ready condition: gates included, what routes requests
    deleting: bool
    first_seen: float
    gone_at: float | None = None
    fell_at: float | None = None  # when the gate last went from True to anything else
    deleting_at: float | None = None


@dataclass(frozen=True)
class RollSeen:
    """A record of status.rolls: the operator's own account of a deletion."""

    service: str
    pod: str
    uid: str
    reason: str
    seen_at: float
    message: str = ""


@dataclass(frozen=True)
class Request:
    """One client request: which pod served (or failed) it, and how it ended."""

    service: str
    uid: str
    start: float
    end: float
    ok: bool
    error: str = ""


@dataclass
class Picture:
    """Everything seen so far; `t0` is the run's start (all times are seconds since it)."""

    t0: float
    pods: dict[str, PodSeen] = field(default_factory=dict)
    rolls: dict[str, RollSeen] = field(default_factory=dict)
    service_ready: dict[str, bool] = field(default_factory=dict)
    polls_failed: int = 0

    def now(self) -> float:
        return time.monotonic() - self.t0

    def serving(self, service: str) -> list[PodSeen]:
        """The pods of `service` that take requests now: Ready, the operator's gate True, not going. Ready
        includes the gate when a kubelet computes it, but a lost node's kubelet computes nothing: its pods
        keep the Ready they had until the node controller marks them not ready (tens of seconds later)."""
        live = [p for p in self.pods.values() if p.service == service and p.gone_at is None]
        return sorted((p for p in live if p.ready and p.gate == "True" and not p.deleting), key=lambda p: p.name)


class Watcher:
    """Polls the pods and services of one namespace into a Picture, in a thread, until stopped."""

    def __init__(self, kubeconfig: str, namespace: str, t0: float) -> None:
        self.namespace = namespace
        self.picture = Picture(t0=t0)
        self.lock = threading.Lock()
        self._stop = threading.Event()
        api = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
        self._core = client.CoreV1Api(api)
        self._custom = client.CustomObjectsApi(api)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def snapshot(self) -> Picture:
        with self.lock:
            return Picture(
                t0=self.picture.t0,
                pods={k: PodSeen(**vars(v)) for k, v in self.picture.pods.items()},
                rolls=dict(self.picture.rolls),
                service_ready=dict(self.picture.service_ready),
                polls_failed=self.picture.polls_failed,
            )

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception:  # the API server is restarted under the soak: keep the last picture
                with self.lock:
                    self.picture.polls_failed += 1
            self._stop.wait(1.0)

    def poll(self) -> None:
        raw = self._core.list_namespaced_pod(
            self.namespace, label_selector=LABEL_SERVICE, _request_timeout=10, _preload_content=False
        )
        pods: list[dict[str, Any]] = json.loads(raw.data)["items"]  # type: ignore[attr-defined]
        services: Any = self._custom.list_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, _request_timeout=10
        )
        with self.lock:
            pic, now = self.picture, self.picture.now()
            present = set()
            for pod in pods:
                meta, status = pod["metadata"], pod.get("status") or {}
                uid = meta["uid"]
                present.add(uid)
                conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
                seen = PodSeen(
                    service=meta["labels"][LABEL_SERVICE],
                    name=meta["name"],
                    uid=uid,
                    node=pod["spec"].get("nodeName") or "",
                    ip=status.get("podIP") or "",
                    gate=conditions.get(READINESS_GATE, ""),
                    ready=conditions.get("Ready") == "True",
                    deleting=meta.get("deletionTimestamp") is not None,
                    first_seen=pic.pods[uid].first_seen if uid in pic.pods else now,
                )
                before = pic.pods.get(uid)
                if before is not None:
                    seen.fell_at = now if before.gate == "True" and seen.gate != "True" else before.fell_at
                    seen.deleting_at = before.deleting_at
                if seen.deleting and seen.deleting_at is None:
                    seen.deleting_at = now
                pic.pods[uid] = seen
            for uid, seen in pic.pods.items():
                if uid not in present and seen.gone_at is None:
                    seen.gone_at = now
            for body in services["items"]:
                name, status = body["metadata"]["name"], body.get("status") or {}
                ready = [c for c in status.get("conditions") or [] if c["type"] == "Ready"]
                pic.service_ready[name] = bool(ready) and ready[0]["status"] == "True"
                for roll in status.get("rolls") or []:
                    if roll["uid"] not in pic.rolls:
                        pic.rolls[roll["uid"]] = RollSeen(
                            name, roll["pod"], roll["uid"], roll["reason"], now, roll.get("message", "")
                        )


class Load:
    """Closed-loop clients, `per_pod` for each serving pod of every service, on the pods' own IPs.

    Client k of a service sends to the (k mod n)-th of its n serving pods, so each engine keeps a steady batch
    (the drift detector judges only batch sizes it learned: health/drift.py) and a pod that leaves the
    service stops getting requests within a poll. Requests are `max_tokens` long with a fresh prompt."""

    def __init__(
        self,
        watcher: Watcher,
        services: list[str],
        *,
        per_pod: int,
        replicas: int,
        max_tokens: int,
        pd: tuple[str, str] | None = None,
    ) -> None:
        self.watcher = watcher
        self.services = services
        self.pd = pd
        self.clients = per_pod * replicas
        self.max_tokens = max_tokens
        self.requests: list[Request] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=120)

    async def _main(self) -> None:
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            clients = [self._client(session, s, k) for s in self.services for k in range(self.clients)]
            if self.pd is not None:
                clients += [self._pd_client(session, *self.pd, k) for k in range(self.clients)]
            await asyncio.gather(*clients)

    def _target(self, service: str, k: int) -> Any:
        with self.watcher.lock:
            serving = self.watcher.picture.serving(service)
            return serving[k % len(serving)] if serving else None

    async def _pd_client(self, session: aiohttp.ClientSession, prefill: str, decode: str, k: int) -> None:
        """A P/D request as the router sends it (tests/e2e/test_disaggregation.py's legs): the prompt to a
        prefill engine for its KV (`do_remote_decode`), then to decode pod k with the prefill's
        kv_transfer_params; a failed first leg is the prefill pod's request, the second the decode pod's."""
        pic = self.watcher.picture
        leg = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
               "remote_block_ids": None, "remote_host": None, "remote_port": None}  # fmt: skip
        while not self._stop.is_set():
            first, second = self._target(prefill, 0), self._target(decode, k)
            if first is None or second is None or not first.ip or not second.ip:
                await asyncio.sleep(0.5)
                continue
            prompt = {"model": MODEL, "prompt": f"soak {uuid.uuid4()}", "sim_prompt_tokens": 256}
            start, ok, error, pod, service = pic.now(), False, "", first, prefill
            try:
                body = {**prompt, "max_tokens": 1, "kv_transfer_params": leg}
                async with session.post(f"http://{first.ip}:{ENGINE_PORT}/v1/completions", json=body) as resp:
                    answer = await resp.json(content_type=None)
                    ok, error = resp.status == 200, "" if resp.status == 200 else f"HTTP {resp.status}"
                if ok:
                    pod, service = second, decode
                    body = {**prompt, "max_tokens": self.max_tokens, "ignore_eos": True,
                            "kv_transfer_params": answer["kv_transfer_params"]}  # fmt: skip
                    async with session.post(f"http://{second.ip}:{ENGINE_PORT}/v1/completions", json=body) as resp:
                        await resp.read()
                        ok, error = resp.status == 200, "" if resp.status == 200 else f"HTTP {resp.status}"
            except (aiohttp.ClientError, TimeoutError, OSError, KeyError, ValueError) as exc:
                ok, error = False, type(exc).__name__
            self.requests.append(Request(service, pod.uid, start, pic.now(), ok, error))
            if not ok:
                await asyncio.sleep(0.5)

    async def _client(self, session: aiohttp.ClientSession, service: str, k: int) -> None:
        pic = self.watcher.picture
        while not self._stop.is_set():
            pod = self._target(service, k)
            if pod is None or not pod.ip:
                await asyncio.sleep(0.5)
                continue
            body = {
                "model": MODEL,
                "prompt": f"soak {uuid.uuid4()}",
                "sim_prompt_tokens": 256,
                "max_tokens": self.max_tokens,
                "ignore_eos": True,
            }
            start, ok, error = pic.now(), False, ""
            try:
                async with session.post(f"http://{pod.ip}:{ENGINE_PORT}/v1/completions", json=body) as resp:
                    await resp.read()
                    ok, error = resp.status == 200, "" if resp.status == 200 else f"HTTP {resp.status}"
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                error = type(exc).__name__
            self.requests.append(Request(service, pod.uid, start, pic.now(), ok, error))
            if not ok:
                await asyncio.sleep(0.5)
