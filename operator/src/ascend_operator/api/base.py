"""The base model every API object derives from: camelCase on the wire, unknown fields refused.

`extra="forbid"` is what turns a misspelt key into an error naming it instead of a silently ignored
setting; the API server's pruning plus kubectl's strict field validation does the same at apply time.
"""

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class ApiModel(BaseModel):
    """A frozen, camelCase, strict-keys pydantic model."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
    )
