"""The contract's `vllm serve` flags against vLLM 0.25.1's argparse definitions."""

import pytest

from ascend_operator.contract import flags as F
from tests.contract.upstream import UpstreamFlag, read_upstream, serve_flags


def _cited_line(source: str) -> str:
    rel, _, line = source.rpartition(":")
    return read_upstream(rel).splitlines()[int(line) - 1]


@pytest.mark.parametrize("flag", F.TYPED, ids=lambda f: f.name)
def test_typed_flag_exists_with_its_form_and_aliases(flag: F.Flag) -> None:
    upstream = serve_flags()
    assert flag.name in upstream, f"{flag.name} is not a vllm serve option"
    got = upstream[flag.name]
    assert got.form == flag.form.value, f"{flag.name}: contract says {flag.form}, upstream {got.form} ({got.where})"
    for spelling in flag.spellings:
        assert spelling in upstream, f"{spelling} ({flag.name}) is not a vllm serve option"
        if spelling not in flag.shorthands:
            assert upstream[spelling].dest == got.dest, f"{spelling} sets {upstream[spelling].dest}, not {got.dest}"
    aliases = {s for s, u in upstream.items() if u.dest == got.dest and not s.startswith("--")}
    assert aliases == set(flag.aliases), f"{flag.name}: upstream short spellings {sorted(aliases)}"


@pytest.mark.parametrize("flag", [f for f in F.TYPED if f.value_type is not str], ids=lambda f: f.name)
def test_value_type_is_the_fields_type(flag: F.Flag) -> None:
    hint = serve_flags()[flag.name].annotation
    assert flag.value_type.__name__ in {p.strip() for p in hint.split("|")}, f"{flag.name}: upstream hint {hint!r}"


@pytest.mark.parametrize("flag", F.TYPED, ids=lambda f: f.name)
def test_typed_flag_cites_its_definition(flag: F.Flag) -> None:
    got = serve_flags()[flag.name]
    assert flag.source == got.where, f"{flag.name} is defined at {got.where}, the contract cites {flag.source}"
    dest = got.dest
    assert flag.name in _cited_line(flag.source) or dest in _cited_line(flag.source)


def test_the_known_flag_set_is_exactly_vllm_serves() -> None:
    upstream: dict[str, UpstreamFlag] = serve_flags()
    assert set(F.BY_SPELLING) == set(upstream), (
        f"missing from the contract: {sorted(set(upstream) - set(F.BY_SPELLING))}; "
        f"not in vLLM 0.25.1: {sorted(set(F.BY_SPELLING) - set(upstream))}"
    )
    wrong = {
        s: (f.form.value, upstream[s].form)
        for s, f in F.BY_SPELLING.items()
        if f.form.value != upstream[s].form and s not in f.shorthands
    }
    assert not wrong, f"forms differ (contract, upstream): {wrong}"


@pytest.mark.parametrize(
    ("spelling", "form", "declared"),
    [
        # `**mamba_kwargs["enable_stochastic_rounding"]`: MambaConfig's field, `bool` (vllm/config/mamba.py:39)
        ("--enable-mamba-cache-stochastic-rounding", "bool", "vllm/engine/arg_utils.py:934"),
        ("--no-enable-mamba-cache-stochastic-rounding", "bool", "vllm/engine/arg_utils.py:934"),
        # HfOverrides = dict[str, Any] | Callable[...] (vllm/config/model.py:91): union_dict_and_str, JSON
        ("--hf-overrides", "json", "vllm/engine/arg_utils.py:856"),
        # MultiModalConfig.limit_per_prompt: MMDummyOptions = dict[...] (vllm/config/multimodal.py:64,80)
        ("--limit-mm-per-prompt", "json", "vllm/engine/arg_utils.py:1244"),
        # ModelConfig.quantization_config: dict | QuantizationConfigArgs (a @config class) | None (model.py:208)
        ("--quantization-config", "json", "vllm/engine/arg_utils.py:825"),
    ],
)
def test_form_is_the_config_fields_that_get_kwargs_reads(spelling: str, form: str, declared: str) -> None:
    """add_argument spreads `get_kwargs(SomeConfig)["field"]`: the form follows that config class's field
    type, aliases spelled out, in _compute_kwargs' order (arg_utils.py:331-385), not EngineArgs' hint."""
    got = serve_flags()[spelling]
    assert (got.form, got.where) == (form, declared)
    assert F.BY_SPELLING[spelling].form.value == form


def test_dotted_keys_reach_every_dict_typed_flag() -> None:
    """FlexibleArgumentParser turns any `--x.k v` into `--x '{"k": v}'` (argparse_utils.py:388-424); the
    JSON the dict-typed flags parse accepts it."""
    text = read_upstream("vllm/utils/argparse_utils.py")
    assert "processed_args.append(json.dumps(dict_value))" in text
    for dotted in ("--hf-overrides.rope_scaling.factor", "--limit-mm-per-prompt.image=2", "--quantization_config.x"):
        assert F.option_name(dotted) == dotted.split(".")[0].replace("_", "-")
    assert F.unknown_options(["--no-enable-mamba-cache-stochastic-rounding", "--hf-overrides.a", "1"]) == []


def test_spec_shorthands_write_the_speculative_config() -> None:
    text = read_upstream("vllm/engine/arg_utils.py")
    merge = text[text.index("def create_speculative_config(") :][:1500]
    for short in F.SPECULATIVE_CONFIG.shorthands:
        assert f'("{short}", ' in merge, f"{short} no longer writes speculative_config"
    assert "self.speculative_config[key] = value" in merge


def test_async_scheduling_is_on_unless_switched_off() -> None:
    """Why asyncScheduling false must render --no-async-scheduling."""
    assert "async_scheduling: bool | None = None" in read_upstream("vllm/config/scheduler.py")
    vllm_config = read_upstream("vllm/config/vllm.py")
    resolve = vllm_config[vllm_config.index("elif self.scheduler_config.async_scheduling is None:") :]
    assert "self.scheduler_config.async_scheduling = True" in resolve[:3000]


def test_unrecognized_arguments_exit_through_argparse() -> None:
    """FlexibleArgumentParser keeps argparse's parse_args, whose error() exits 2 on unknown options."""
    text = read_upstream("vllm/utils/argparse_utils.py")
    assert "class FlexibleArgumentParser(ArgumentParser):" in text
    assert "return super().parse_args(processed_args, namespace)" in text
    assert "def error(" not in text
    assert "def parse_known_args(self, args=None, namespace=None):" in text


def test_option_name_follows_flexible_argument_parser() -> None:
    text = read_upstream("vllm/utils/argparse_utils.py")
    assert 'pattern = re.compile(r"(?<=--)[^\\.]*")' in text  # underscores -> dashes up to the first dot
    assert 'if processed_arg.startswith("-") and "." in processed_arg:' in text  # dotted JSON keys
    assert F.option_name("--speculative_config.method") == "--speculative-config"
    assert F.option_name("-sc.method") == "-sc"
    assert F.option_name("-O3") == "--optimization-level"


def test_abbreviations_stay_allowed() -> None:
    """Neither FlexibleArgumentParser nor the serve subparser turns argparse's allow_abbrev off."""
    for rel in ("vllm/utils/argparse_utils.py", "vllm/entrypoints/cli/serve.py", "vllm/entrypoints/cli/main.py"):
        assert "allow_abbrev" not in read_upstream(rel)
    assert F.option_name("--max-model=4096") == "--max-model-len"
    assert F.option_name("--max-num") == "--max-num"  # ambiguous: batched-tokens, seqs, partial-prefills


def test_vllm_main_parses_strictly() -> None:
    """`vllm serve` goes through parse_args (not parse_known_args): an unknown option is fatal."""
    main = read_upstream("vllm/entrypoints/cli/main.py")
    assert "args = parser.parse_args()" in main
    assert "parse_known_args" not in main
