"""`aisctl bench mixed-ab`'s comparison: medians per side over interleaved rounds, B against A, a table that
says which clock measured it, and the CLI wiring (two endpoints, each with the engines that count for it).

What a user notices: the table answers "does P/D help my short requests, and what does it cost the long
one", with the simulator's figures labelled as such; a round that lost the long request is not hidden.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ascend_operator.bench.compare import mixed_ab_summary, table, write_plot
from ascend_operator.cli.main import build_parser


def rounds() -> list[dict[str, object]]:
    def one(
        endpoint: str, r: int, p50: float, p99: float, total: float, tok_s: float, ok: bool = True
    ) -> dict[str, object]:
        return {"endpoint": endpoint, "round": r, "short_ttft_p50_s": p50, "short_ttft_p99_s": p99,
                "long_latency_s": total, "long_ttft_s": total / 2, "output_tok_s": tok_s, "long_ok": ok}  # fmt: skip

    return [
        one("aggregated", 0, 4.0, 12.0, 80.0, 500.0),
        one("disaggregated", 0, 1.0, 2.0, 90.0, 450.0),
        one("disaggregated", 1, 1.2, 3.0, 100.0, 470.0, ok=False),
        one("aggregated", 1, 5.0, 14.0, 70.0, 520.0),
    ]


def test_each_side_is_the_median_of_its_rounds_and_b_is_compared_with_a() -> None:
    summary = mixed_ab_summary(rounds(), "aggregated", "disaggregated", clock="aissim")
    agg, pd = summary["sides"]["aggregated"], summary["sides"]["disaggregated"]
    assert (agg["short_ttft_p50_s"], agg["short_ttft_p99_s"], agg["long_latency_s"]) == (4.5, 13.0, 75.0)
    assert (pd["short_ttft_p50_s"], pd["output_tok_s"], pd["rounds"]) == (1.1, 460.0, 2)
    assert summary["b_vs_a_pct"]["short_ttft_p99_s"] == -80.8
    assert summary["b_vs_a_pct"]["long_latency_s"] == 26.7
    assert (agg["long_ok"], pd["long_ok"]) == (True, False)  # one round lost the long request: said


def test_the_table_labels_simulator_figures_and_shows_every_figure() -> None:
    text = table(mixed_ab_summary(rounds(), "aggregated", "disaggregated", clock="aissim"))
    assert "simulator figures (aissim's Ascend timings, engine clock)" in text
    assert "| short TTFT p99 | 13.00 s | 2.50 s | -80.8% |" in text
    assert "| output tok/s | 510.0 | 460.0 | -9.8% |" in text
    assert "wall-clock figures" in table(mixed_ab_summary(rounds(), "aggregated", "disaggregated", clock="wall"))


def test_the_plot_is_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "comparison.png"
    write_plot(mixed_ab_summary(rounds(), "aggregated", "disaggregated", clock="aissim"), path, title="t")
    assert path.stat().st_size > 10_000


def test_the_cli_takes_two_endpoints_and_their_engines() -> None:
    args = build_parser().parse_args([
        "bench", "mixed-ab", "--url-a", "http://r:1", "--url-b", "http://r:2", "--metrics-a", "http://e0,http://e1",
        "--metrics-b", "http://decode", "--label-b", "pd",
    ])  # fmt: skip
    assert (args.metrics_a, args.metrics_b, args.label_a, args.label_b) == (
        ("http://e0", "http://e1"),
        ("http://decode",),
        "A",
        "pd",
    )
    assert (args.long_context, args.short, args.rounds) == (256 * 1024, 31, 2)
