"""docs/api.md carries the API table generated from the models; README.md names the two commands a newcomer
runs and stays short enough to read in ten minutes (issue 28 item 11)."""

from ascend_operator.api.docs import api_table, table_in
from ascend_operator.reference import doc_notes
from tests.fixtures.examples import ROOT

README = (ROOT / "README.md").read_text()
API_PAGE = ROOT / "docs" / "api.md"
CI_RUN = (ROOT / ".ci" / "run").read_text()


def test_api_table_matches_the_models() -> None:
    assert table_in(API_PAGE.read_text()) == api_table(notes=doc_notes()), "regenerate the table: make docs"


def test_readme_test_command_is_what_ci_runs() -> None:
    assert "make test " in README
    assert "exec make test" in CI_RUN
    assert "make demo " in README


def test_readme_is_a_ten_minute_read_with_the_architecture_and_the_limits() -> None:
    assert len(README.splitlines()) < 250
    assert "```mermaid" in README
    assert "## Limits" in README
