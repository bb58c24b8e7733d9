#!/usr/bin/env bash
# Installs (or reuses) vllm-router 0.1.17, the router spec.router renders (render/router.py), from PyPI: its
# manylinux wheel carries the `vllm-router` binary. tests/unit/test_render_router.py hands the rendered
# arguments to that binary's own --help and parser, so a flag the operator renders that 0.1.17 does not take
# fails a test instead of a router pod. The last line of stdout is the binary's path; progress goes to stderr.
# Where: ${XDG_CACHE_HOME:-$HOME/.cache}/ascend-operator/vllm-router-<version>/, a virtualenv of its own, under
# a lock, stamped once the binary ran. Warm: one file check.
set -euo pipefail
version="${AIS_VLLM_ROUTER_VERSION:-0.1.17}"
venv="${XDG_CACHE_HOME:-$HOME/.cache}/ascend-operator/vllm-router-$version"
bin="$venv/bin/vllm-router"
if [[ -f "$venv/.done" ]]; then echo "$bin"; exit 0; fi
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if [[ ! -f "$venv/.done" ]]; then
  echo "vllm-router: installing $version into $venv" >&2
  [[ -x "$venv/bin/python" ]] || "${PYTHON:-python3}" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "vllm-router==$version" >&2
  "$bin" --help >/dev/null  # a broken install fails here, not in a test
  touch "$venv/.done"
fi
echo "$bin"
