"""An S3 store for tests/ansible/test_model_stage.py: moto's S3 server on 127.0.0.1 with authentication on.

Run with the Python of the venv hack/s3-server.sh installs (moto and boto3 are not in the project's venv):
    python _s3_store.py BUCKET PREFIX DIRECTORY
It creates an IAM user that may only read the bucket, uploads every file of DIRECTORY under PREFIX, then
turns authentication on, so every later request (the role's) must carry a valid SigV4 signature, and
prints one JSON line: endpoint, the reader's keys. Each request is logged on stderr with its status (206
for a ranged GET). Commands on stdin, one per line, answered "ok": `put KEY FILE` replaces an object (with
the admin user's keys).
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

import boto3
from moto import settings
from moto.server import ThreadedMotoServer

READ_ONLY = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"], "Resource": "*"}],
}
ADMIN = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def user(iam: object, name: str, policy: Mapping[str, object]) -> dict[str, str]:
    iam.create_user(UserName=name)  # type: ignore[attr-defined]
    iam.put_user_policy(UserName=name, PolicyName=f"{name}-policy", PolicyDocument=json.dumps(policy))  # type: ignore[attr-defined]
    key = iam.create_access_key(UserName=name)["AccessKey"]  # type: ignore[attr-defined]
    return {"access_key_id": key["AccessKeyId"], "secret_access_key": key["SecretAccessKey"]}


def main() -> None:
    bucket, prefix, directory = sys.argv[1], sys.argv[2].strip("/"), Path(sys.argv[3])
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=True)
    with contextlib.redirect_stdout(sys.stderr):  # it announces itself on stdout; stdout is for the keys
        server.start()
    endpoint = f"http://127.0.0.1:{port}"
    anon = {
        "endpoint_url": endpoint,
        "region_name": "us-east-1",
        "aws_access_key_id": "x",
        "aws_secret_access_key": "x",
    }
    iam = boto3.client("iam", **anon)
    reader, admin = user(iam, "model-stage", READ_ONLY), user(iam, "admin", ADMIN)
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=admin["access_key_id"],
        aws_secret_access_key=admin["secret_access_key"],
    )
    s3.create_bucket(Bucket=bucket)
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        s3.put_object(Bucket=bucket, Key=f"{prefix}/{path.relative_to(directory)}", Body=path.read_bytes())
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0  # from here on, every request is authenticated and authorized
    print(json.dumps({"endpoint": endpoint, **reader}), flush=True)
    for line in sys.stdin:
        verb, key, file = line.split()
        assert verb == "put", line
        s3.put_object(Bucket=bucket, Key=key, Body=Path(file).read_bytes())
        print("ok", flush=True)
    server.stop()


if __name__ == "__main__":
    main()
