"""``metis keys --config FILE [--reset NAME]``: each gateway key's spend in its period and its
budget, read from the Redis the gateways share, and one key's spend reset; refused, saying why,
when the spend is in a gateway's memory."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import anyio
import pytest
import yaml

from metis.cli import main
from metis.gateway.keys import Keys, KeySpec, digest
from metis.model.response import TokenUsage

KEYS = [
    {"name": "team-a", "sha256": digest("k1"), "budget_usd": 25, "budget_period": "month"},
    {"name": "ci", "key_env": "METIS_TEST_UNSET_CI_KEY"},  # not read: a spend is by name
]


def _file(tmp_path: Path, **gateway: object) -> str:
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"gateway": {"keys": KEYS, **gateway}}))
    return str(path)


async def _charged(redis_url: str) -> None:
    """One reply of 1000 tokens in and 100 out on gpt-4o charged to team-a, as a gateway does."""
    from metis.gateway.app import redis_client
    from metis.gateway.keys_redis import RedisLedger

    async with redis_client(redis_url) as client:
        keys = Keys([KeySpec.model_validate(KEYS[0])], {}, RedisLedger(client))
        state = keys.find("k1")
        assert state is not None
        await keys.admit(state, "m")
        await keys.release(state, "openai:gpt-4o", TokenUsage(input_tokens=1000, output_tokens=100))


def _rows(out: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in out.splitlines()[2:]}


@pytest.mark.backend_independent(False)
def test_the_keys_spend_in_redis_is_listed_and_one_is_reset(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _file(tmp_path, redis_url=redis_url)
    anyio.run(_charged, redis_url)
    assert main(["keys", "--config", config]) == 0
    rows = _rows(capsys.readouterr().out)
    team = rows["team-a"]
    assert team[1].startswith("month:") and Decimal(team[2]) > 0 and team[3] == "25"
    assert team[4].endswith("-01T00:00:00Z")  # renews on the first of next month
    assert rows["ci"][1:] == ["none", "0", "-", "never"]
    assert main(["keys", "--config", config, "--reset", "team-a"]) == 0
    said = capsys.readouterr().out
    assert said.startswith("key 'team-a': its spend of month:") and "is reset to 0" in said
    assert main(["keys", "--config", config]) == 0
    assert _rows(capsys.readouterr().out)["team-a"][2] == "0"


def test_an_unknown_key_to_reset_is_named_with_the_nearest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _file(tmp_path, redis_url="redis://127.0.0.1:1")
    assert main(["keys", "--config", config, "--reset", "team-b"]) == 1
    err = capsys.readouterr().err
    assert "gateway.keys has no key named 'team-b'; its keys: team-a, ci" in err
    assert "did you mean 'team-a'?" in err


def test_spend_in_a_gateways_memory_is_refused_saying_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keys", "--config", _file(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "has no gateway.redis_url: each gateway process keeps its keys' spend in its own" in err
    assert "cannot be read or reset from outside it" in err
