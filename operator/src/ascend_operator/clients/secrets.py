"""The engines' API keys, read from their Secrets through the API and cached for a short time.

Why a cache: the health loop runs a canary per pod every few seconds; reading the Secret for each would
load the API server for a value that rarely changes. Why a short one (and a drop on 401): a rotated
Secret must reach the canary without an operator restart. Why the previous key too: a container reads
its env once, so until the operator has replaced an engine (one at a time) it still takes the key it
started with; the canary falls back to that key on a 401 instead of turning every replica unready at
once on a rotation. Values live only in this object's dicts; the
`ApiKey` wrapper's repr hides them, so a stray log of a structure holding one shows no key.
"""

import base64
import binascii
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ascend_operator.api.security import SecretKeyRef
from ascend_operator.clients.kube import ApiRefused
from ascend_operator.clients.resources import SECRET, Kube

#: Seconds a key read from its Secret is reused.
TTL_SECONDS = 30.0

ReadKey = Callable[[str, str, str], Awaitable[tuple[str, str] | None]]
"""(namespace, Secret name, key) -> (value, the Secret's resourceVersion), None when the Secret or key is
missing or unreadable."""


async def read_secret_key(kube: Kube, namespace: str, name: str, key: str) -> tuple[str, str] | None:
    """One value of a Secret and the Secret's resourceVersion (a `ReadKey`); None when the Secret or key is
    missing, not readable (403: the chart grants `get` on named Secrets only) or not base64 text. The
    value is never logged."""
    try:
        secret = await kube.get(SECRET, namespace, name)
    except ApiRefused as exc:
        if exc.status == 403:
            return None
        raise
    raw = ((secret or {}).get("data") or {}).get(key)
    if secret is None or raw is None:
        return None
    try:
        value = base64.b64decode(raw, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    return value, str((secret.get("metadata") or {}).get("resourceVersion") or "")


@dataclass(frozen=True)
class ApiKey:
    """A key value that does not print, and the resourceVersion of the Secret it came from."""

    value: str = field(repr=False)
    version: str = ""


@dataclass
class ApiKeyCache:
    """Keys by (namespace, Secret, key), each with the monotonic time it was read."""

    read: ReadKey
    ttl: float = TTL_SECONDS
    clock: Callable[[], float] = time.monotonic
    _entries: dict[tuple[str, str, str], tuple[float, ApiKey | None]] = field(default_factory=dict, repr=False)
    _last: dict[tuple[str, str, str], ApiKey] = field(default_factory=dict, repr=False)
    _previous: dict[tuple[str, str, str], ApiKey] = field(default_factory=dict, repr=False)

    async def get(self, namespace: str, ref: SecretKeyRef) -> ApiKey | None:
        """The key, from the cache when fresh; None when it cannot be read (the canary then goes without)."""
        slot = (namespace, ref.name, ref.key)
        cached = self._entries.get(slot)
        now = self.clock()
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        found = await self.read(*slot)
        key = ApiKey(found[0], found[1]) if found and found[0] else None
        self._entries[slot] = (now, key)
        if key is not None:
            last = self._last.get(slot)
            if last is not None and last.value != key.value:
                self._previous[slot] = last
            self._last[slot] = key
        return key

    def previous(self, namespace: str, ref: SecretKeyRef) -> ApiKey | None:
        """The value the Secret held before its last change, if this process saw one."""
        return self._previous.get((namespace, ref.name, ref.key))

    def invalidate(self, namespace: str, ref: SecretKeyRef) -> None:
        """Forget a key the engine refused, so the next pass reads the Secret again."""
        self._entries.pop((namespace, ref.name, ref.key), None)
