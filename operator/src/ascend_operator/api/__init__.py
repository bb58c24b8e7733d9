"""The AscendInferenceService API: pydantic models that are also the CRD's schema.

Everything that reads a custom resource parses it into these models once; nothing downstream touches the
raw body. `ascend_operator.crd` turns the same models into the CRD, so the schema the API server enforces
and the one the operator trusts cannot drift apart. This package is the leaf of the layers (.importlinter):
it imports nothing else of ascend_operator.
"""

from ascend_operator.api.constants import API_VERSION, GROUP, KIND, PLURAL, SHORT_NAME, VERSION
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.api.status import AscendInferenceServiceStatus, Condition

__all__ = [
    "API_VERSION",
    "GROUP",
    "KIND",
    "PLURAL",
    "SHORT_NAME",
    "VERSION",
    "AscendInferenceServiceSpec",
    "AscendInferenceServiceStatus",
    "Condition",
]
