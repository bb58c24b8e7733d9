"""The `vllm serve` command line, as an argument list, derived from the engine contract's entries.

Never a shell string: the seed lost `--speculative-config` to a comment inside a continued shell line and
the server still started (docs/FACTS.md "Operations"). Every flag comes from the engine contract
(`ascend_operator.contract.flags.TYPED`): an entry names the spec field it carries and how (`field`, `fixed`,
`positional`, `says_false`, `negated`, `merged`, `switched`), and this module turns any entry into its
arguments the same way, so a typed flag is its contract entry plus its api field and nothing here.
JSON-valued flags are compact JSON; a float is written as the seed writes it (0.90).
"""

import json
from typing import Any

from pydantic import BaseModel

from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.contract import flags as F

#: The engine's command, rendered as the first container args (the pod keeps the image's ENTRYPOINT).
#: vllm-ascend v0.25.1rc1's Dockerfile sets no ENTRYPOINT and ends in CMD ["/bin/bash"] (Dockerfile:78).
ENGINE_COMMAND = ["vllm"]


def compact_json(value: Any) -> str:
    """JSON with no spaces, as the seed's command writes it."""
    return json.dumps(value, separators=(",", ":"))


def decimal(value: float) -> str:
    """A fraction as the seed writes it (0.90), exact for any other value."""
    return f"{value:.2f}" if round(value, 2) == value else repr(value)


def field_value(spec: AscendInferenceServiceSpec, path: str) -> Any:
    """The spec's value at an attribute path (`engine.port`)."""
    node: Any = spec
    for step in path.split("."):
        if node is None:  # an unset optional object: its fields are unset too
            return None
        node = getattr(node, step)
    return node


def _object(spec: AscendInferenceServiceSpec, flag: F.Flag, value: Any) -> dict[str, Any] | None:
    """A JSON flag's object: the field's model without unset keys, switched keys, then the passthrough."""
    if value is None:
        return None
    obj: dict[str, Any] = value.model_dump(mode="json", exclude_none=True) if isinstance(value, BaseModel) else value
    passthrough = obj.pop(flag.merged, {}) if flag.merged else {}
    for switch, keys in flag.switched:
        if field_value(spec, switch):
            obj.update(dict.fromkeys(keys, True))
    obj.update(passthrough)
    return obj or None  # an empty object is vLLM's default: left out


def flag_args(spec: AscendInferenceServiceSpec, flag: F.Flag) -> list[str]:
    """The arguments one contract entry renders for `spec` (none when its field is unset or off)."""
    value = flag.fixed if flag.field is None else field_value(spec, flag.field)
    if value is None:
        return []
    if flag.form is F.Form.BOOL:
        on = bool(value) != flag.negated
        return flag.switch(on) if on or flag.says_false else []
    if flag.form is F.Form.JSON:
        obj = _object(spec, flag, value)
        return [] if obj is None else flag.json(obj)
    text = decimal(value) if isinstance(value, float) else str(value)
    return [text] if flag.positional else flag.value(text)


#: The entries a spec renders (those a multi-node group sets per node have neither field nor fixed value).
RENDERED: tuple[F.Flag, ...] = tuple(f for f in F.TYPED if f.field is not None or f.fixed is not None)


def build_engine_args(spec: AscendInferenceServiceSpec) -> list[str]:
    """The container args after `vllm`: `serve MODEL --flag value ...`, in the contract's (the seed's) order,
    then `spec.engine.extraArgs` as given."""
    args = ["serve"]
    for flag in RENDERED:
        args += flag_args(spec, flag)
    return args + list(spec.engine.extra_args)
