"""Fixtures shared by the unit tests: the example spec and the seed's production profile."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from ascend_operator.api.parse import ParsedService, parse_resource

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dsv4-flash.yaml"
SEED_PROFILE = ROOT / "tests" / "data" / "seed_production_profile.sh"


@pytest.fixture
def example_body() -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return body


@pytest.fixture
def example(example_body: dict[str, Any]) -> ParsedService:
    return parse_resource(example_body)
