"""README.md carries the API table generated from the models, and the two commands a newcomer runs."""

from ascend_operator.api.docs import api_table
from tests.unit.conftest import ROOT

README = (ROOT / "README.md").read_text()
CI_RUN = (ROOT / ".ci" / "run").read_text()


def test_api_table_matches_the_models() -> None:
    section = README.split("<!-- api:begin -->\n", 1)[1].split("<!-- api:end -->", 1)[0]
    assert section == api_table(), "regenerate the README table with `aisctl docs`"


def test_readme_test_command_is_what_ci_runs() -> None:
    assert "make test " in README
    assert "exec make test" in CI_RUN
    assert "make demo " in README
