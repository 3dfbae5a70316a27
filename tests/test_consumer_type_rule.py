"""One consumer-type rule: :data:`rpquery.models.CONSUMER_TYPE_RE` (with
``CONSUMER_TYPE_MAX_LENGTH``), checked by :func:`rpquery.models.check_consumer_type`,
is the pattern the API's JSON schemas and the CLI's help write, and it is still the
pattern Placement 16.0's schemas use (``placement/schemas/common.py``, read in
``.venv-placement``).
"""

from __future__ import annotations

import json
import subprocess

import click
import pytest

from benchmarks import side_by_side
from rpquery.api import schemas
from rpquery.api.handlers import allocations, usages
from rpquery.cli.allocations import allocation_set
from rpquery.cli.core import claim
from rpquery.errors import InvalidRequest
from rpquery.models import CONSUMER_TYPE_MAX_LENGTH, CONSUMER_TYPE_RE, check_consumer_type
from tests.side_by_side_api import READY, SKIP_REASON

RULE = CONSUMER_TYPE_RE.pattern


def test_the_model_checks_the_rule_and_its_length() -> None:
    assert RULE == "^[A-Z0-9_]+$" and CONSUMER_TYPE_MAX_LENGTH == 255
    longest = "X" * CONSUMER_TYPE_MAX_LENGTH
    assert check_consumer_type(longest) == longest
    for bad in ("", "X" * (CONSUMER_TYPE_MAX_LENGTH + 1), "instance", "INSTANCE\n", 1):
        with pytest.raises(InvalidRequest) as err:
            check_consumer_type(bad)
        assert err.value.code == "rpquery.consumer.bad_type"
        assert f"must match {RULE} (1-255 characters)" in str(err.value)


def test_the_api_schemas_write_the_models_pattern() -> None:
    body = allocations.SCHEMA_1_38["properties"]["consumer_type"]
    assert body["pattern"] is RULE and body["maxLength"] == CONSUMER_TYPE_MAX_LENGTH
    assert body == schemas.CONSUMER_TYPE
    posted = allocations._post_schema(allocations.SCHEMA_1_38)["patternProperties"]
    for consumer in posted.values():
        assert consumer["properties"]["consumer_type"]["pattern"] is RULE
    query = usages.SCHEMA_1_38["properties"]["consumer_type"]
    assert query["pattern"] == f"{RULE}|^all|^unknown$"
    assert query == schemas.CONSUMER_TYPE_FILTER


@pytest.mark.parametrize("command", [claim, allocation_set], ids=lambda c: c.name)
def test_the_cli_help_writes_the_models_pattern(command: click.Command) -> None:
    (option,) = [p for p in command.params if p.name == "consumer_type"]
    assert isinstance(option, click.Option) and option.required
    assert option.help == f"INSTANCE, MIGRATION, ... ({RULE})."


DUMP = """
import json
from placement.schemas import common
print(json.dumps([common.CONSUMER_TYPE_PATTERN, common.CONSUMER_TYPE_GET_PATTERN]))
"""


@pytest.mark.skipif(not READY, reason=SKIP_REASON)
def test_the_rule_is_still_placements() -> None:
    done = subprocess.run(
        [str(side_by_side.PYTHON), "-c", DUMP], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    pattern, get_pattern = json.loads(done.stdout)
    assert pattern == RULE
    assert get_pattern == usages.SCHEMA_1_38["properties"]["consumer_type"]["pattern"]
