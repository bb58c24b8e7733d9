"""The generation canary the kubelet runs inside the engine container, and the one definition of forward
progress it shares with the operator's health loop. Standard library only, importing nothing else of the
operator (.importlinter: canary-stdlib-only).

Why a package of its own, at the bottom of the layers: the engine image (vllm-ascend) has Python but not this
package, so the pod runs these two files' source (`source()`, for render/probes.py) with the image's python3.
The progress rule is imported by health (the stall and drift detectors) and read by render as source; both
are imports a linter sees, where render once read health/progress.py and probe.py as text from above it.
"""

from importlib import resources

#: The modules the probe's source is made of, in order: the progress rule first, then the probe that uses it.
SOURCE_MODULES = ("progress.py", "probe.py")


def source() -> str:
    """The stdlib-only canary probe as one script: the definition of forward progress, then the probe."""
    package = resources.files(__name__)
    return "\n\n".join(package.joinpath(name).read_text() for name in SOURCE_MODULES)
