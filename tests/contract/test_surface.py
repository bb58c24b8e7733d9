"""The reasons validation/surface.py gives for refusing --disable-log-stats, --grpc and friends, held against
vLLM 0.25.1: each cited line still does what the message says, and each refused flag is a `vllm serve` option."""

import re

import pytest

from ascend_operator.contract import flags as F
from ascend_operator.validation.surface import SURFACE
from tests.contract.upstream import read_upstream, serve_flags

#: What each file:line a message cites must still say.
CITED = {
    "vllm/v1/engine/async_llm.py:124": "self.log_stats = log_stats or has_custom_loggers",
    "vllm/v1/engine/async_llm.py:157": "if self.log_stats:",
    "vllm/v1/metrics/loggers.py:1333": "if not custom_prometheus_logger:",
    "vllm/entrypoints/cli/serve.py:55": 'if getattr(args, "grpc", False):',
    "vllm/entrypoints/openai/api_server.py:572": "if args.uds:",
    "vllm/engine/arg_utils.py:2074": "if self.tokens_only and not model_config.skip_tokenizer_init:",
    "vllm/renderers/base.py:159": 'raise ValueError("Tokenizer not available when `skip_tokenizer_init=True`")',
}


def _line(rel: str, line: int) -> str:
    return read_upstream(rel).splitlines()[line - 1].strip()


@pytest.mark.parametrize("where", sorted(CITED))
def test_cited_lines_say_what_the_messages_claim(where: str) -> None:
    rel, _, line = where.rpartition(":")
    assert _line(rel, int(line)) == CITED[where]


def test_every_citation_in_the_messages_is_checked() -> None:
    cited = {m.group(1) for g in SURFACE for m in re.finditer(r"(vllm/[\w/]+\.py:\d+)", g.message)}
    assert len(cited) == 6
    assert cited <= set(CITED), cited - set(CITED)


@pytest.mark.parametrize("flag", [f for g in SURFACE for f in g.flags])
def test_every_refused_flag_is_a_vllm_serve_option(flag: str) -> None:
    assert flag in serve_flags()
    assert flag in F.BY_SPELLING


def test_without_log_stats_no_prometheus_logger_exists() -> None:
    """--disable-log-stats -> log_stats False -> no StatLoggerManager, which is what adds PrometheusStatLogger."""
    text = read_upstream("vllm/v1/engine/async_llm.py")
    assert "log_stats=not engine_args.disable_log_stats," in text
    block = text[text.index("if self.log_stats:") :][:300]
    assert "self.logger_manager = StatLoggerManager(" in block
    assert "PrometheusStatLogger(vllm_config, self.engine_indexes)" in read_upstream("vllm/v1/metrics/loggers.py")


def test_grpc_serves_instead_of_http() -> None:
    serve = read_upstream("vllm/entrypoints/cli/serve.py")
    branch = serve[serve.index('if getattr(args, "grpc", False):') :][:200]
    assert "uvloop.run(serve_grpc(args))" in branch
    assert "return" in branch


def test_uds_and_ssl_change_where_or_how_http_is_served() -> None:
    api = read_upstream("vllm/entrypoints/openai/api_server.py")
    assert "sock = create_server_unix_socket(args.uds)" in api
    assert "is_ssl = args.ssl_keyfile and args.ssl_certfile" in api
    assert "ssl_keyfile=args.ssl_keyfile," in api


def test_api_server_count_keeps_the_prometheus_logger() -> None:
    """Why --api-server-count is allowed: several API servers drop only the logging stat logger
    (loggers.py:1300-1308); the Prometheus one is appended whatever the client count (1333-1336)."""
    loggers = read_upstream("vllm/v1/metrics/loggers.py")
    manager = loggers[loggers.index("class StatLoggerManager") :]
    count = manager.index("if client_count > 1:")
    prometheus = manager.index("if not custom_prometheus_logger:")
    assert "disabling stats logging to avoid incomplete stats" in manager[count:prometheus]

    def indent(at: int) -> int:
        return at - manager.rindex("\n", 0, at) - 1

    assert indent(prometheus) < indent(count + manager[count:].index("disabling"))  # not under the count's branch
