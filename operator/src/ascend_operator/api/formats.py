"""Kubernetes string formats the spec carries into pods: label values and image references.

Why: `aisctl render` must refuse what `kubectl apply` refuses, and a value the API server would only refuse
later (a nodeSelector value with a newline reaches the pod, which the API server rejects after the operator
has created everything else; an image that is no reference leaves a pod in InvalidImageName) must be
refused at apply too. Each format is one regular expression, checked by pydantic with a message naming the
rule and written into the CRD as the field's `pattern`, so both sides apply the same rule. The expressions
use only what Python's `re` and the API server's RE2 read alike (ASCII classes, no `\\w`).
"""

import re
from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator, Field

LABEL_VALUE_MAX = 63
#: k8s.io/apimachinery/pkg/util/validation IsValidLabelValue: empty, or alphanumerics, '-', '_' and '.',
#: starting and ending with an alphanumeric, at most 63 characters.
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
LABEL_VALUE_RULE = (
    f"must be a Kubernetes label value: empty, or at most {LABEL_VALUE_MAX} characters of letters, digits, "
    "'-', '_' and '.', starting and ending with a letter or digit"
)

IMAGE_MAX = 512
_COMPONENT = r"[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*"
_DOMAIN_PART = r"([A-Za-z0-9]|[A-Za-z0-9][-A-Za-z0-9]*[A-Za-z0-9])"
_DOMAIN = rf"({_DOMAIN_PART}(\.{_DOMAIN_PART})*|\[[0-9A-Fa-f:]+\])(:[0-9]+)?"
_TAG = r"[A-Za-z0-9_][-A-Za-z0-9_.]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
#: github.com/distribution/reference's grammar (regexp.go ReferenceRegexp): `[domain[:port]/]path[:tag][@digest]`,
#: path components lowercase.
IMAGE_REFERENCE = rf"^({_DOMAIN}/)?{_COMPONENT}(/{_COMPONENT})*(:{_TAG})?(@{_DIGEST})?$"
IMAGE_RULE = (
    "must be an image reference, [registry[:port]/]path[:tag][@digest] with a lowercase path "
    f"(distribution/reference), at most {IMAGE_MAX} characters"
)


def _full(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern.removeprefix("^").removesuffix("$"))


def _checker(pattern: str, rule: str) -> Callable[[str], str]:
    compiled = _full(pattern)

    def check(value: str) -> str:
        # fullmatch, not match: Python's `$` also matches before a trailing newline, RE2's does not
        if compiled.fullmatch(value) is None:
            raise ValueError(rule)
        return value

    return check


LabelValue = Annotated[
    str,
    Field(max_length=LABEL_VALUE_MAX, json_schema_extra={"pattern": LABEL_VALUE}),
    AfterValidator(_checker(LABEL_VALUE, LABEL_VALUE_RULE)),
]
ImageReference = Annotated[
    str,
    Field(min_length=1, max_length=IMAGE_MAX, json_schema_extra={"pattern": IMAGE_REFERENCE}),
    AfterValidator(_checker(IMAGE_REFERENCE, IMAGE_RULE)),
]
