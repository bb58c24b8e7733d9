#!/usr/bin/env bash
# The project's whole test command (`make test`, and what .ci/run calls): lint, type-check, then every
# pytest suite. The e2e and Ansible suites bring up what they need themselves (cached Kubernetes binaries,
# a debootstrap root), so this script stays a plain list of checks.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash hack/venv.sh
echo "== ruff" >&2
.venv/bin/ruff check operator simulator tests bench
.venv/bin/ruff format --check operator simulator tests bench
echo "== mypy --strict" >&2
.venv/bin/mypy
echo "== pytest" >&2
set +e
.venv/bin/pytest "$@"
rc=$?
set -e
# pytest exits 5 when it collected no test: that is a broken suite here, not a pass.
if [[ $rc -eq 5 ]]; then
  echo "pytest collected no tests" >&2
  exit 1
fi
exit $rc
