#!/usr/bin/env bash
# Installs (or reuses) vllm-router 0.1.17, the router spec.router renders (render/router.py), from PyPI: its
# manylinux wheel carries the `vllm-router` binary. tests/render/test_render_router.py hands the rendered
# arguments to that binary's own --help and parser, so a flag the operator renders that 0.1.17 does not take
# fails a test instead of a router pod. The last line of stdout is the binary's path; progress goes to stderr.
# Where: ${XDG_CACHE_HOME:-$HOME/.cache}/ascend-operator/vllm-router-<version>/ (hack/lib/pip-tool.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/pip-tool.sh"
version="${AIS_VLLM_ROUTER_VERSION:-0.1.17}"
pip_tool vllm-router "$version" "vllm-router==$version" vllm-router
