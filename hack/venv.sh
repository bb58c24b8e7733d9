#!/usr/bin/env bash
# Creates (or reuses) the project's virtualenv in .venv with both distributions of this repository (the
# operator `ascend-inference-operator` and the simulator `aissim`) and every Python package the tests need.
# Why a stamp: `pip install` of the dev + ansible extras takes a minute even when nothing changed; the
# stamp is the hash of pyproject.toml, so a repeat run only pays for it when the dependencies change.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${AIS_VENV:-$root/.venv}"
python="${PYTHON:-python3}"
stamp="$venv/.ais-deps-$(cat "$root/pyproject.toml" "$root/simulator/pyproject.toml" | sha256sum | cut -c1-16)"
if [[ ! -x "$venv/bin/python" ]]; then
  echo "venv: creating $venv" >&2
  "$python" -m venv "$venv"
fi
if [[ ! -f "$stamp" ]]; then
  echo "venv: installing the operator (with its dev and ansible extras) and the simulator (aissim)" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$root[dev,ansible]" -e "$root/simulator"
  rm -f "$venv"/.ais-deps-*
  touch "$stamp"
fi
