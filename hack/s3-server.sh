#!/usr/bin/env bash
# Installs (or reuses) moto's S3 server, the S3-compatible store tests/ansible/test_model_stage.py stages a
# model from: a real implementation of the S3 API (SigV4 authentication, ranged GETs, 403/404 error bodies)
# from PyPI. Why a venv of its own: moto needs botocore, which pins python-dateutil<3 while the kubernetes
# client of the project's venv needs >=3. The last line of stdout is the `moto_server` path; progress goes
# to stderr. Where: ${XDG_CACHE_HOME:-$HOME/.cache}/ascend-operator/moto-<version>/ (hack/lib/pip-tool.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/pip-tool.sh"
version="${AIS_MOTO_VERSION:-5.2.5}"
pip_tool moto "$version" "moto[server]==$version" moto_server
