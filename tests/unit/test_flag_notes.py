"""A flag is one contract entry: the CRD and docs/api.md say which vLLM flag each spec field renders, from
the contract (ascend_operator/reference.py), and no field's description spells its own flag by hand (a second
copy that drifts when the contract's entry changes)."""

from ascend_operator.contract.flags import TYPED
from ascend_operator.crd import spec_schema
from ascend_operator.reference import alias_path, flag_notes, note


def _field_info(path: tuple[str, ...]):  # type: ignore[no-untyped-def]
    from pydantic import BaseModel

    from ascend_operator.api.docs import model_of
    from ascend_operator.api.spec import AscendInferenceServiceSpec

    model: type[BaseModel] | None = AscendInferenceServiceSpec
    info = None
    for step in path:
        assert model is not None
        info = next(i for name, i in model.model_fields.items() if (i.alias or name) == step)
        model = model_of(info.annotation)
    return info


def test_every_typed_flag_with_a_field_is_a_spec_field() -> None:
    flagged = [f for f in TYPED if f.field is not None]
    assert len(flagged) >= 25
    assert {f.name for f in flagged} == {f.name for _, f in flag_notes()}, "a contract field the spec lacks"
    assert alias_path("engine.max_model_len") == ("engine", "maxModelLen")
    assert alias_path("engine.no_such_field") is None


def test_the_crd_names_each_fields_flag_from_the_contract() -> None:
    schema = spec_schema()
    for path, flag in flag_notes():
        node = schema
        for step in path:
            node = node["properties"][step]
        assert node["description"].endswith(note(flag)), ".".join(path)
        assert flag.source in node["description"]
    max_model_len = schema["properties"]["engine"]["properties"]["maxModelLen"]["description"]
    assert "`--max-model-len` (vllm/engine/arg_utils.py:" in max_model_len


def test_no_description_spells_its_own_flag() -> None:
    spelled = [
        ".".join(path)
        for path, flag in flag_notes()
        if any(f"`{s}`" in (_field_info(path).description or "") for s in (flag.name, *flag.aliases))
    ]
    assert not spelled, f"these descriptions repeat the flag the contract names: {spelled}"
