#!/usr/bin/python
"""Reads a model's manifest and shards from an HTTP(S) directory or an S3-compatible bucket, resumably.

Why a module of its own: get_url restarts a 4 GB shard from byte 0 after any interruption and cannot sign
S3 requests, and the seed's model is 75 such shards (~292 GB). Here a shard is written to `<file>.part`,
an interrupted download keeps what arrived, the next run asks only for the rest (an HTTP Range request),
and the file takes its name only after the SHA-256 of the whole of it matches the manifest. S3 requests
are signed with AWS Signature Version 4 (the standard library only: nodes get no boto3).
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import http.client
import os
import re
import xml.etree.ElementTree as ET
from urllib.error import HTTPError, URLError
from urllib.parse import quote, urlsplit

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

DOCUMENTATION = r"""
---
module: model_stage_fetch
short_description: Read a manifest, size or resumably fetch model files from HTTP(S) or S3
description:
  - C(action=read) returns the text of one object (the manifest); it never changes anything.
  - C(action=size) returns the size of each of C(paths), and which of them the store does not have.
  - C(action=fetch) downloads C(path) to C(dest) through C(dest).part, resuming a partial download with a
    Range request, and renames it to C(dest) only when its SHA-256 equals C(sha256).
options:
  action:
    type: str
    required: true
    choices: [read, size, fetch]
    description: What to do.
  base_url:
    type: str
    required: true
    description: C(http(s)://host/dir) or C(s3://bucket/prefix).
  path:
    type: str
    description: Path of the object under C(base_url) (read, fetch).
  paths:
    type: list
    elements: str
    description: Paths to size (size).
  dest:
    type: path
    description: Destination file (fetch).
  sha256:
    type: str
    description: Expected SHA-256 of the whole file (fetch).
  timeout:
    type: int
    default: 600
    description: Seconds to wait on the server per request.
  validate_certs:
    type: bool
    default: true
    description: Verify the server's TLS certificate.
  s3_endpoint_url:
    type: str
    default: ""
    description: Endpoint of the S3-compatible store; empty means AWS (https://s3.REGION.amazonaws.com).
  s3_region:
    type: str
    default: us-east-1
    description: Region in the signature's credential scope.
  s3_addressing_style:
    type: str
    default: path
    choices: [path, virtual]
    description: C(path) puts the bucket in the path, C(virtual) in the host name.
  s3_access_key_id:
    type: str
    default: ""
    description: Access key; empty sends unsigned requests (a public bucket).
  s3_secret_access_key:
    type: str
    default: ""
    description: Secret key.
  s3_session_token:
    type: str
    default: ""
    description: Session token of temporary credentials.
extends_documentation_fragment: [files]
"""

CHUNK = 1 << 20
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


class FetchError(Exception):
    """A request or download failed; the message is what the user reads, `status` the HTTP status if any."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def sigv4_headers(
    *,
    method: str,
    url: str,
    region: str,
    access_key: str,
    secret_key: str,
    session_token: str = "",
    now: datetime.datetime,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """Headers (with Authorization) that sign a bodiless S3 request with AWS Signature Version 4.

    Every header in `extra` is signed too (a signed Range cannot be altered on the way).
    """
    parts = urlsplit(url)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    scope = f"{now:%Y%m%d}/{region}/s3/aws4_request"
    headers = {"host": parts.netloc, "x-amz-content-sha256": EMPTY_SHA256, "x-amz-date": amz_date}
    if session_token:
        headers["x-amz-security-token"] = session_token
    headers.update({k.lower(): v for k, v in (extra or {}).items()})
    names = sorted(headers)
    query = "&".join(
        sorted(
            f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
            for k, _, v in (p.partition("=") for p in parts.query.split("&") if p)
        )
    )
    canonical = "\n".join(
        [
            method,
            parts.path or "/",
            query,
            "".join(f"{n}:{' '.join(headers[n].split())}\n" for n in names),
            ";".join(names),
            EMPTY_SHA256,
        ]
    )
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + secret_key).encode()
    for part in (f"{now:%Y%m%d}", region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    del headers["host"]  # the HTTP client sends it
    return headers


class Store:
    """One HTTP directory or S3 prefix: URLs and (signed) headers for the objects under it."""

    def __init__(self, params: dict) -> None:
        self.params = params
        base = params["base_url"]
        if base.startswith("s3://"):
            bucket, _, prefix = base[len("s3://") :].partition("/")
            if not bucket:
                raise FetchError(f"base_url {base!r} names no bucket (s3://BUCKET/PREFIX)")
            self.bucket, self.prefix = bucket, prefix.strip("/")
        elif re.match(r"^https?://", base):
            self.bucket, self.prefix = "", base.rstrip("/")
        else:
            raise FetchError(f"base_url {base!r} is neither http(s)://... nor s3://BUCKET/PREFIX")

    def url(self, path: str) -> str:
        key = quote(path, safe="/-_.~")
        if not self.bucket:
            return f"{self.prefix}/{key}"
        key = f"{quote(self.prefix, safe='/-_.~')}/{key}" if self.prefix else key
        endpoint = (self.params["s3_endpoint_url"] or f"https://s3.{self.params['s3_region']}.amazonaws.com").rstrip(
            "/"
        )
        if self.params["s3_addressing_style"] == "virtual":
            scheme, _, host = endpoint.partition("://")
            return f"{scheme}://{self.bucket}.{host}/{key}"
        return f"{endpoint}/{quote(self.bucket, safe='')}/{key}"

    def open(self, method: str, path: str, headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
        """The response (raises FetchError naming the object and the server's reason)."""
        url = self.url(path)
        headers = dict(headers or {})
        if self.bucket and self.params["s3_access_key_id"]:
            headers = sigv4_headers(
                method=method,
                url=url,
                region=self.params["s3_region"],
                access_key=self.params["s3_access_key_id"],
                secret_key=self.params["s3_secret_access_key"],
                session_token=self.params["s3_session_token"],
                now=datetime.datetime.now(datetime.timezone.utc),  # noqa: UP017 (nodes may run Python < 3.11)
                extra=headers,
            )
        try:
            return open_url(
                url,
                method=method,
                headers=headers,
                timeout=self.params["timeout"],
                validate_certs=self.params["validate_certs"],
                follow_redirects="safe",
            )
        except HTTPError as e:
            raise FetchError(f"{method} {url}: HTTP {e.code} {reason(e)}", e.code) from e
        except (URLError, OSError) as e:
            raise FetchError(f"{method} {url}: {getattr(e, 'reason', e)}") from e


def reason(e: HTTPError) -> str:
    """S3's <Code>: <Message> from an error body, else the HTTP reason."""
    try:
        root = ET.fromstring(e.read() or b"<x/>")
    except (ET.ParseError, OSError):
        return str(e.reason)
    code, message = root.findtext("Code"), root.findtext("Message")
    return f"{code}: {message}" if code else str(e.reason)


def file_sha256(path: str) -> hashlib._Hash:
    """The SHA-256 of the file so far, to go on updating as more of it arrives."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h


def download(store: Store, path: str, part: str) -> tuple[str, int, int]:
    """Append the rest of `path` to `part`; (SHA-256 of all of part, bytes it held before, bytes fetched)."""
    have = os.path.getsize(part) if os.path.exists(part) else 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    try:
        resp = store.open("GET", path, headers)
    except FetchError as e:
        if have and e.status == 416:  # the part is not a prefix of the object: start over
            os.unlink(part)
            return download(store, path, part)
        raise
    status = resp.getcode()
    if have and status == 206:
        h = file_sha256(part)
        mode = "ab"
    else:  # 200: the server sent the whole object (it ignores Range, or nothing was there)
        h, mode, have = hashlib.sha256(), "wb", 0
    fetched = 0
    with open(part, mode) as f:
        try:
            for block in iter(lambda: resp.read(CHUNK), b""):
                f.write(block)
                h.update(block)
                fetched += len(block)
        except (OSError, http.client.HTTPException) as e:
            raise FetchError(
                f"GET {store.url(path)} stopped after {have + fetched} bytes ({e}); {part} keeps them and the"
                " next run resumes from there"
            ) from e
        f.flush()
        os.fsync(f.fileno())
    length = resp.headers.get("Content-Length")
    if length is not None and int(length) != fetched:
        raise FetchError(
            f"GET {store.url(path)} ended after {fetched} of {length} bytes; {part} keeps"
            f" {have + fetched} bytes and the next run resumes from there"
        )
    return h.hexdigest(), have, fetched


def fetch(module: AnsibleModule, store: Store) -> dict:
    p = module.params
    dest, want = p["dest"], p["sha256"].lower()
    part = dest + ".part"
    attributes = module.load_file_common_arguments(p, path=dest)
    result: dict = {"changed": False, "dest": dest, "sha256": want, "resumed_from": 0, "fetched_bytes": 0}
    if os.path.isfile(dest) and file_sha256(dest).hexdigest() == want:
        result["changed"] = module.set_fs_attributes_if_different(attributes, False)
        return result
    have = os.path.getsize(part) if os.path.isfile(part) else 0
    result.update(changed=True, resumed_from=have)
    if module.check_mode:
        result["msg"] = f"would fetch {p['path']}" + (f", resuming after {have} bytes" if have else "")
        return result
    got, resumed, fetched = download(store, p["path"], part)
    if got != want and resumed:  # a stale or foreign part: one more try from byte 0
        os.unlink(part)
        got, resumed, fetched = download(store, p["path"], part)
    result.update(resumed_from=resumed, fetched_bytes=fetched)
    if got != want:
        os.unlink(part)
        raise FetchError(f"SHA-256 in the manifest {want}, downloaded {got}")
    os.replace(part, dest)
    module.set_fs_attributes_if_different(attributes, True)
    return result


def size(store: Store, paths: list[str]) -> dict:
    sizes, missing = {}, {}
    for path in paths:
        try:
            resp = store.open("HEAD", path)
        except FetchError as e:
            missing[path] = str(e)
            continue
        sizes[path] = int(resp.headers.get("Content-Length") or 0)
    return {"changed": False, "sizes": sizes, "missing": missing}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "action": {"type": "str", "required": True, "choices": ["read", "size", "fetch"]},
            "base_url": {"type": "str", "required": True},
            "path": {"type": "str"},
            "paths": {"type": "list", "elements": "str", "default": []},
            "dest": {"type": "path"},
            "sha256": {"type": "str"},
            "timeout": {"type": "int", "default": 600},
            "validate_certs": {"type": "bool", "default": True},
            "s3_endpoint_url": {"type": "str", "default": ""},
            "s3_region": {"type": "str", "default": "us-east-1"},
            "s3_addressing_style": {"type": "str", "default": "path", "choices": ["path", "virtual"]},
            "s3_access_key_id": {"type": "str", "default": "", "no_log": True},
            "s3_secret_access_key": {"type": "str", "default": "", "no_log": True},
            "s3_session_token": {"type": "str", "default": "", "no_log": True},
        },
        required_if=[("action", "read", ["path"]), ("action", "fetch", ["path", "dest", "sha256"])],
        add_file_common_args=True,
        supports_check_mode=True,
    )
    p = module.params
    try:
        store = Store(p)
        if p["action"] == "read":
            resp = store.open("GET", p["path"])
            module.exit_json(changed=False, content=resp.read().decode("utf-8", "replace"), url=store.url(p["path"]))
        if p["action"] == "size":
            module.exit_json(**size(store, p["paths"]))
        module.exit_json(**fetch(module, store))
    except FetchError as e:
        module.fail_json(msg=str(e))


if __name__ == "__main__":
    main()
