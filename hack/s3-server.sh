#!/usr/bin/env bash
# Installs (or reuses) moto's S3 server, the S3-compatible store tests/ansible/test_model_stage.py stages a
# model from: a real implementation of the S3 API (SigV4 authentication, ranged GETs, 403/404 error bodies)
# from PyPI. Why a venv of its own: moto needs botocore, which pins python-dateutil<3 while the kubernetes
# client of the project's venv needs >=3. The last line of stdout is the `moto_server` path; progress goes
# to stderr. Where: ${XDG_CACHE_HOME:-$HOME/.cache}/ascend-operator/moto-<version>/, under a lock, stamped
# once the server's --help ran. Warm: one file check.
set -euo pipefail
version="${AIS_MOTO_VERSION:-5.2.5}"
venv="${XDG_CACHE_HOME:-$HOME/.cache}/ascend-operator/moto-$version"
bin="$venv/bin/moto_server"
if [[ -f "$venv/.done" ]]; then echo "$bin"; exit 0; fi
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if [[ ! -f "$venv/.done" ]]; then
  echo "moto: installing moto[server] $version into $venv" >&2
  [[ -x "$venv/bin/python" ]] || "${PYTHON:-python3}" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "moto[server]==$version" >&2
  "$bin" --help >/dev/null  # a broken install fails here, not in a test
  touch "$venv/.done"
fi
echo "$bin"
