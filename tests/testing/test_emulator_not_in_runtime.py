"""The emulator is a testing tool (metis.testing.emulator): importing metis, building adapters
and calling them never loads it, nor do the commands that do not run it; where it is wanted
(``metis emulator``, ``python -m metis.testing.emulator``, ``from metis.testing import
stand_in``) it still is there."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each check starts a fresh interpreter

EMULATOR = "metis.testing.emulator"
CASSETTE = Path(__file__).parents[2] / "cassettes" / "anthropic" / "tool_call.yaml"


def run_python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def loaded_emulator_modules(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter; the emulator modules it left in sys.modules."""
    report = f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({EMULATOR!r}))))"
    done = run_python(f"{textwrap.dedent(code)}\nimport json, sys\n{report}\n")
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_importing_metis_does_not_load_the_emulator() -> None:
    assert loaded_emulator_modules("import metis") == []
    done = run_python("import metis", "-X", "importtime")
    assert done.returncode == 0 and "metis.testing" not in done.stderr


def test_building_and_calling_adapters_does_not_load_the_emulator() -> None:
    code = """
    import anyio, httpx, respx
    from metis import AdapterConfig, CanonicalRequest, Message, build_adapter
    from metis.stacks.loader import builtin_stacks

    REPLY = {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Hello!"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 9, "output_tokens": 3},
    }

    async def main() -> None:
        for stack in builtin_stacks():  # every stage of every built-in stack
            build_adapter(stack, AdapterConfig(api_key="test"))
        with respx.mock:
            respx.post("https://api.anthropic.com/v1/messages").mock(
                return_value=httpx.Response(200, json=REPLY)
            )
            async with build_adapter("anthropic", AdapterConfig(api_key="test")) as adapter:
                request = CanonicalRequest(
                    model="anthropic:claude-sonnet-4-5", messages=[Message.user("Hi")],
                    max_output_tokens=16, stream=False,
                )
                assert (await adapter.complete(request)).text == "Hello!"

    anyio.run(main)
    """
    assert loaded_emulator_modules(code) == []


@pytest.mark.parametrize(
    "argv",
    [["stack", "anthropic"], ["replay", str(CASSETTE)]],
    ids=["stack", "replay"],
)
def test_commands_that_do_not_run_the_emulator_do_not_load_it(argv: list[str]) -> None:
    code = f"""
    import contextlib, io
    from metis.cli import main
    with contextlib.redirect_stdout(io.StringIO()):
        assert main({argv!r}) == 0
    """
    assert loaded_emulator_modules(code) == []


def test_the_commands_that_may_run_it_load_it_only_when_they_do() -> None:
    # demo and chat live, record without --emulator: the emulator is never started
    code = "import metis.cli.demo, metis.cli.chat, metis.cli.record, metis.cli.models"
    assert loaded_emulator_modules(code) == []


def test_the_emulator_runs_as_a_module_and_as_a_command() -> None:
    for args in (["-m", EMULATOR, "--help"], ["-m", "metis.cli", "emulator", "--help"]):
        done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "metis emulator" in done.stdout and "--faults" in done.stdout


def test_metis_testing_offers_the_stand_in_names_loaded_on_first_use() -> None:
    assert loaded_emulator_modules("import metis.testing, metis.testing.cassette") == []
    code = """
    from metis.testing import FAULT_HEADER, MODELS, Emulator, StandIn, stand_in
    from metis.testing import emulator
    assert stand_in is emulator.stand_in and Emulator is emulator.Emulator
    assert MODELS["anthropic"].startswith("anthropic:") and FAULT_HEADER and StandIn
    """
    assert EMULATOR in loaded_emulator_modules(code)
    done = run_python("import metis.testing as t; t.no_such_name")
    assert "AttributeError" in done.stderr and "no_such_name" in done.stderr


def test_the_old_path_is_gone() -> None:
    done = run_python("import metis.emulator")
    assert done.returncode != 0 and "ModuleNotFoundError" in done.stderr
