"""The model_stage role's fetch module without a node: its S3 signatures against AWS's published examples,
and its resume logic against a local HTTP server that honours, ignores or refuses Range requests.

The end-to-end runs (a real S3 server, a stand-in node, Ansible) are tests/ansible/test_model_stage.py.
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.util
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

MODULE = Path(__file__).parents[2] / "playbooks/roles/model_stage/library/model_stage_fetch.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("model_stage_fetch", MODULE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


msf = load()

# The examples of "Signature Calculations for the Authorization Header: Transferring Payload in a Single
# Chunk (AWS Signature Version 4)", Amazon S3 API Reference: bucket examplebucket, 2013-05-24, us-east-1.
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
AWS_DATE = datetime.datetime(2013, 5, 24, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    ("url", "extra", "signed", "signature"),
    [
        (  # GET Object, with a signed Range (what a resumed shard sends)
            "https://examplebucket.s3.amazonaws.com/test.txt",
            {"Range": "bytes=0-9"},
            "host;range;x-amz-content-sha256;x-amz-date",
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        ),
        (  # GET Bucket Lifecycle: a query parameter without a value
            "https://examplebucket.s3.amazonaws.com/?lifecycle",
            {},
            "host;x-amz-content-sha256;x-amz-date",
            "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
        ),
        (  # GET Bucket (List Objects): query parameters sorted by name
            "https://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J",
            {},
            "host;x-amz-content-sha256;x-amz-date",
            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
        ),
    ],
)
def test_signatures_match_the_s3_documentation(url: str, extra: dict[str, str], signed: str, signature: str) -> None:
    headers = msf.sigv4_headers(
        method="GET", url=url, region="us-east-1", access_key=AWS_KEY, secret_key=AWS_SECRET, now=AWS_DATE, extra=extra
    )
    assert headers["authorization"] == (
        f"AWS4-HMAC-SHA256 Credential={AWS_KEY}/20130524/us-east-1/s3/aws4_request, SignedHeaders={signed}, "
        f"Signature={signature}"
    )
    assert headers["x-amz-date"] == "20130524T000000Z"
    assert "host" not in headers  # the HTTP client sets it from the URL it signed


def params(base_url: str, **over: Any) -> dict[str, Any]:
    return {
        "base_url": base_url,
        "timeout": 10,
        "validate_certs": True,
        "s3_endpoint_url": "",
        "s3_region": "us-east-1",
        "s3_addressing_style": "path",
        "s3_access_key_id": "",
        "s3_secret_access_key": "",
        "s3_session_token": "",
    } | over


@pytest.mark.parametrize(
    ("base", "over", "url"),
    [
        ("http://mirror:8080/models/m/", {}, "http://mirror:8080/models/m/sub/a%20b.safetensors"),
        ("s3://weights/DeepSeek-V3.1", {"s3_endpoint_url": "http://127.0.0.1:9000/"}, None),
        ("s3://weights/DeepSeek-V3.1", {"s3_region": "cn-north-4"}, None),
        ("s3://weights", {"s3_addressing_style": "virtual", "s3_endpoint_url": "https://obs.example"}, None),
    ],
)
def test_object_urls(base: str, over: dict[str, Any], url: str | None) -> None:
    expected = (
        url
        or {
            "http://127.0.0.1:9000/": "http://127.0.0.1:9000/weights/DeepSeek-V3.1/sub/a%20b.safetensors",
            "": "https://s3.cn-north-4.amazonaws.com/weights/DeepSeek-V3.1/sub/a%20b.safetensors",
            "https://obs.example": "https://weights.obs.example/sub/a%20b.safetensors",
        }[over.get("s3_endpoint_url", "")]
    )
    assert msf.Store(params(base, **over)).url("sub/a b.safetensors") == expected


@pytest.mark.parametrize("base", ["ftp://mirror/m", "s3:///prefix", "/srv/models"])
def test_a_base_url_of_another_kind_is_refused_naming_it(base: str) -> None:
    with pytest.raises(msf.FetchError, match="base_url"):
        msf.Store(params(base))


BLOB = bytes(range(256)) * 40  # 10240 bytes


class Server:
    """Serves BLOB at /m/shard; `mode` says how it answers a Range request; `ranges` records them."""

    def __init__(self) -> None:
        self.mode = "honour"
        self.ranges: list[str | None] = []
        self.cut_after: int | None = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                rng = self.headers.get("Range")
                server.ranges.append(rng)
                if self.path != "/m/shard":
                    self.send_error(404)
                    return
                start = int(rng.removeprefix("bytes=").rstrip("-")) if rng and server.mode != "ignore" else 0
                if rng and server.mode != "ignore" and start >= len(BLOB):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(BLOB)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = BLOB[start:]
                self.send_response(206 if start else 200)
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(BLOB) - 1}/{len(BLOB)}")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if server.cut_after is not None:  # the connection drops mid-body
                    self.wfile.write(body[: server.cut_after])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/m"


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    thread = threading.Thread(target=s.httpd.serve_forever, daemon=True)
    thread.start()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def fetch(server: Server, part: Path) -> tuple[str, int, int]:
    result: tuple[str, int, int] = msf.download(msf.Store(params(server.url)), "shard", str(part))
    return result


def test_a_partial_shard_is_resumed_with_a_range_request(server: Server, tmp_path: Path) -> None:
    part = tmp_path / "shard.part"
    part.write_bytes(BLOB[:4000])
    digest, resumed, fetched = fetch(server, part)
    assert server.ranges == ["bytes=4000-"]
    assert (digest, resumed, fetched) == (hashlib.sha256(BLOB).hexdigest(), 4000, len(BLOB) - 4000)
    assert part.read_bytes() == BLOB


def test_a_server_that_ignores_range_sends_it_all_and_nothing_is_appended_twice(server: Server, tmp_path: Path) -> None:
    server.mode = "ignore"
    part = tmp_path / "shard.part"
    part.write_bytes(BLOB[:4000])
    digest, resumed, fetched = fetch(server, part)
    assert (digest, resumed, fetched) == (hashlib.sha256(BLOB).hexdigest(), 0, len(BLOB))
    assert part.read_bytes() == BLOB


def test_a_part_longer_than_the_object_starts_over(server: Server, tmp_path: Path) -> None:
    part = tmp_path / "shard.part"
    part.write_bytes(BLOB + b"stale tail")
    digest, resumed, _ = fetch(server, part)
    assert server.ranges == [f"bytes={len(BLOB) + 10}-", None]
    assert (digest, resumed) == (hashlib.sha256(BLOB).hexdigest(), 0)
    assert part.read_bytes() == BLOB


def test_a_dropped_connection_keeps_what_arrived_and_the_next_run_fetches_only_the_rest(
    server: Server, tmp_path: Path
) -> None:
    part = tmp_path / "shard.part"
    server.cut_after = 3000
    with pytest.raises(msf.FetchError, match=r"after 3000 .*bytes.* resume"):
        fetch(server, part)
    assert part.read_bytes() == BLOB[:3000]
    server.cut_after = None
    digest, resumed, fetched = fetch(server, part)
    assert server.ranges == [None, "bytes=3000-"]
    assert (digest, resumed, fetched) == (hashlib.sha256(BLOB).hexdigest(), 3000, len(BLOB) - 3000)


def test_a_missing_object_names_the_url_and_the_status(server: Server, tmp_path: Path) -> None:
    with pytest.raises(msf.FetchError, match=r"GET http://127\.0\.0\.1:\d+/m/absent: HTTP 404"):
        msf.download(msf.Store(params(server.url)), "absent", str(tmp_path / "absent.part"))
