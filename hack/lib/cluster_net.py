"""Addresses of hack/local-cluster: the pod net each cluster claims and free loopback ports.

Why a module of its own: parallel test sessions each run a local cluster, and two clusters handing pods the
same 127.x IPs made simulators answer for the wrong cluster; the claim protocol lives here, apart from the
processes and nodes, so it reads on its own. hack/local-cluster imports it from hack/lib/.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

#: Fake nodes' InternalIPs are 127.<NODE_NET>.0.<n+1>; pod nets never take this octet.
NODE_NET = 2


def claims_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "ascend-operator" / "pod-nets"


def claim_pod_net(st: Path) -> int:
    """The second octet of this cluster's pod IPs: $AIS_POD_NET, or the lowest unclaimed one in 1..200 (never
    NODE_NET, whose addresses the fake nodes' InternalIPs name).

    A claim is a file named after the octet holding the state dir; it is stale once that state dir has
    no cluster.json (its cluster went down or never came up), and then it may be taken over.
    """
    if os.environ.get("AIS_POD_NET"):
        net = int(os.environ["AIS_POD_NET"])
        if not 1 <= net <= 250 or net == NODE_NET:
            raise SystemExit(f"local-cluster: AIS_POD_NET={net} outside 1..250 or the node net {NODE_NET}")
        return net
    claims = claims_dir()
    claims.mkdir(parents=True, exist_ok=True)
    for net in (n for n in range(1, 201) if n != NODE_NET):
        claim = claims / str(net)
        try:
            fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            owner = Path(claim.read_text().strip() or "/nonexistent")
            if owner != st and (owner / "cluster.json").exists():
                continue
            claim.write_text(str(st))
            return net
        with os.fdopen(fd, "w") as f:
            f.write(str(st))
        return net
    raise SystemExit(f"local-cluster: every pod net 1..200 is claimed in {claims}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
