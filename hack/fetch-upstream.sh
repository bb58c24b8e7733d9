#!/usr/bin/env bash
# Fetch the engine sources the contract is checked against (tests/contract/), once per version.
#
# Why: the engine contract (operator/src/ascend_operator/contract/) claims what vLLM and vllm-ascend accept
# and export; the contract tier reads the real sources to hold it to that. Source distributions only
# (`pip download --no-deps --no-binary :all:`), never installed, never built.
# Cached in ~/.cache/ascend-operator/upstream/<name>-<version>/ (a stamp marks a complete extraction), so
# every later run is offline. Prints the extracted directory of each package.
set -euo pipefail

VLLM_VERSION="${VLLM_VERSION:-0.25.1}"
VLLM_ASCEND_VERSION="${VLLM_ASCEND_VERSION:-0.25.1rc1}"   # PyPI's name for the v0.25.1rc1 tag
CACHE="${AIS_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ascend-operator/upstream}"
PIP="${PIP:-pip}"

fetch_one() {
  local name="$1" version="$2"
  local dest="$CACHE/$name-$version"
  if [[ -f "$dest/.complete" ]]; then
    echo "$dest"
    return
  fi
  local tmp
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' RETURN
  # `pip download` of an sdist unpacks it and then runs its build backend for metadata, which for vLLM
  # needs torch; that step may fail. --no-clean keeps pip's unpacked copy of the archive in its private
  # TMPDIR, which is exactly the sdist's content: take that, whatever the metadata step said.
  TMPDIR="$tmp" "$PIP" download --quiet --no-clean --no-deps --no-binary :all: --no-build-isolation \
    --dest "$tmp/dest" "$name==$version" >"$tmp/pip.log" 2>&1 || true
  local src
  src="$(find "$tmp" -mindepth 3 -maxdepth 3 -name PKG-INFO -path "$tmp/pip-*" -printf '%h\n' | head -n1)"
  if [[ -z "$src" ]] || ! grep -qx "Version: $version" "$src/PKG-INFO"; then
    cat "$tmp/pip.log" >&2
    echo "fetch-upstream: no sdist of $name==$version unpacked" >&2
    exit 1
  fi
  rm -rf "$dest" && mkdir -p "$(dirname "$dest")"
  mv "$src" "$dest"
  touch "$dest/.complete"
  echo "$dest"
}

fetch_one vllm "$VLLM_VERSION"
fetch_one vllm-ascend "$VLLM_ASCEND_VERSION"
