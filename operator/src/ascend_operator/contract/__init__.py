"""The engine contract: what vLLM 0.25.1 and vllm-ascend v0.25.1rc1 accept and export, as data.

Why one package: the renderer, the extraArgs checks (Python and CEL), the simulator's argument parser, the
tests' independent parser and the post-start config check used to carry their own lists of flag spellings
and metric names, each agreeing only with the simulator written beside it. Here every flag the renderer
emits (form, aliases, upstream file:line), every `vllm serve` option name, every metric the operator reads
(type, labels, when vLLM updates it) and every vllm-ascend additional-config key the API sets is one entry;
tests/contract/ holds each entry against the real upstream sources (hack/fetch-upstream.sh). Pure data and
tiny helpers, no I/O. Line numbers cite the sdists on PyPI: vllm==0.25.1 and vllm-ascend==0.25.1rc1.
"""

VLLM_VERSION = "0.25.1"
VLLM_ASCEND_VERSION = "0.25.1rc1"
