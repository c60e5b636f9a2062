"""The `metis` command line (issue 5): demo, chat, stack, replay, record, emulator, errors.

Commands run as `python -m metis.cli ...` subprocesses with no provider keys in the
environment (so everything is offline, against the in-process emulator), or in-process
through `metis.cli.main` where that is simpler.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path
from typing import Any

import pytest

from metis.cli import build_parser, main
from metis.cli.models import FAMILIES, Models, price
from metis.cli.output import CliError, Output
from metis.cli.record import PLACEHOLDER_KEY
from metis.errors import ConfigError
from metis.model.response import TokenUsage
from metis.stacks.loader import builtin_stacks, load_stack

ROOT = Path(__file__).parents[2]
CASSETTES = ROOT / "cassettes"
KEY_VARS = {v for v in (load_stack(n).auth.env for n in builtin_stacks()) if v}
ANSI = re.compile(r"\x1b\[")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARS and k != "METIS_DEBUG"}
    env.pop("NO_COLOR", None)
    env["PYTHONIOENCODING"] = "utf-8"
    env.update(extra)
    return env


def cli(
    *args: str, input: str | None = None, timeout: float = 90, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metis.cli", *args],
        input=input,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=clean_env(**env),
        cwd=ROOT,
        timeout=timeout,
    )


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in KEY_VARS:
        monkeypatch.delenv(var, raising=False)


def table_rows(stdout: str) -> list[list[str]]:
    """The demo's table: the rows under the header line that starts with 'turn'."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("turn  provider"))
    return [line.split() for line in lines[start + 2 :] if re.match(r"\s*\d+  ", line)]


# demo ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_demo_runs_offline_visits_every_provider_and_ends_with_the_table() -> None:
    done = cli("demo")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    out = done.stdout
    assert not ANSI.search(out)  # piped: plain text
    assert "offline" in out and "metis emulator" in out
    assert "→ get_weather(" in out and "←" in out  # a tool call, run locally, and its result
    assert "According to get_weather" in out  # the next provider used the result
    assert "You said:" not in out  # every question is one the tool answers, none is echoed
    assert 'get_weather({"city":"One"})' not in out  # "One more: ... in Lisbon?"
    rows = table_rows(out)
    assert [row[1] for row in rows][: len(FAMILIES)] == list(FAMILIES)  # one turn each, in order
    # then a fallback turn: anthropic overloaded, openai answers through the route
    assert [row[1] for row in rows][len(FAMILIES) :] == ["openai", "openai"]
    assert "(anthropic:claude-sonnet-4-5 failed: overloaded: Overloaded)" in out
    rows = rows[: len(FAMILIES)]
    stops = [row[3] for row in rows]
    assert "tool_use" in stops and stops[-1] == "end_turn"
    for row in rows:
        assert int(row[4]) > 0 and int(row[5]) > 0  # tokens in, out
    costs = {row[1]: row[6] for row in rows}
    assert costs["anthropic"].startswith("$") and costs["openai"].startswith("$")
    assert costs["gemini"].startswith("$")  # every catalogued model is priced
    assert costs["tgi"] == "$0.000000"  # a local server's model costs nothing
    ids = {row[1]: int(row[-3]) for row in rows}
    assert ids["anthropic"] == 0 and ids["tgi"] > 0  # tool ids carried, in each provider's form
    assert all(row[-2] == "0" and row[-1] == "0" for row in rows)  # nothing dropped, no retries
    assert re.search(r"\d+ turns, 10 providers", out)


def test_demo_help_names_every_provider_the_demo_visits_in_order() -> None:
    demo = next(
        action.choices["demo"]
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    listed = re.search(r"on every turn \(([^;]*);", " ".join(demo.description.split()))
    assert listed is not None
    assert listed.group(1).split(", ") == list(FAMILIES)


@pytest.mark.slow
def test_demo_takes_a_subset_of_providers_and_survives_faults() -> None:
    done = cli(
        "demo", "--providers", "anthropic,openai", "--faults", "rate_limit=0:0.3", "--pace", "0"
    )
    assert done.returncode == 0, done.stderr
    providers = {row[1] for row in table_rows(done.stdout)}
    assert providers == {"anthropic", "openai"}


# chat ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_chat_with_piped_stdin_swaps_model_and_keeps_the_history() -> None:
    script = "Hello there\n/model openai:gpt-4o\nWhat is the weather in Paris?\n/quit\n"
    done = cli("chat", "-m", "anthropic:claude-sonnet-4-5", "--tool", input=script)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert not ANSI.search(out)
    assert "ANTHROPIC_API_KEY is not set" in out and "OPENAI_API_KEY is not set" in out
    assert "you> Hello there" in out  # piped lines are echoed after the prompt
    assert "anthropic:claude-sonnet-4-5>" in out and "You said: Hello there" in out
    assert "openai:gpt-4o>" in out
    assert "→ get_weather(" in out and "According to get_weather: Paris" in out
    assert out.index("anthropic:claude-sonnet-4-5>") < out.index("openai:gpt-4o>")


@pytest.mark.slow
def test_chat_reports_a_bad_model_and_carries_on() -> None:
    done = cli("chat", "-m", "openai", input="/model nosuch\nhi\n")  # EOF ends it
    assert done.returncode == 0
    assert "metis: error:" not in done.stderr  # said in the chat, which goes on
    assert "unknown model 'nosuch'" in done.stdout and "/model NAME" in done.stdout
    assert "You said: hi" in done.stdout


@pytest.mark.slow
def test_chat_with_a_local_server_that_is_not_running_says_so_and_offers_offline(
    tmp_path: Path,
) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    models = tmp_path / "models.yaml"
    models.write_text(
        f"adapters:\n  local: {{type: ollama, base_url: 'http://127.0.0.1:{port}'}}\n"
        "models:\n  ollama:qwen3: {adapter: local}\n"
    )
    done = cli("chat", "-m", "ollama:qwen3", "--models", str(models), input="hi\n")
    assert f"(at http://127.0.0.1:{port})" in done.stdout  # where it sends: no quiet stand-in
    assert "You said" not in done.stdout
    assert done.stderr.startswith("metis: error: ollama network: cannot reach")
    assert "metis chat --offline" in done.stderr


def _read_until(proc: subprocess.Popen[bytes], marker: str, seen: str, timeout: float) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while marker not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            seen += chunk.decode("utf-8", "replace")
    assert marker in seen, seen
    return seen


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process")
def test_chat_ctrl_c_cancels_the_reply_keeps_the_partial_text_and_goes_on() -> None:
    stall = "stall=30;after=4@1"  # the first reply stalls after a few events, until Ctrl-C
    proc = subprocess.Popen(
        [sys.executable, "-m", "metis.cli", "chat", "-m", "anthropic", "--faults", stall],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
        cwd=ROOT,
    )
    assert proc.stdin is not None
    try:
        proc.stdin.write(b"Tell me a long story about the sea\n")
        proc.stdin.flush()
        seen = _read_until(proc, "  You", "", 20)  # the reply has begun, then stalls
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        seen = _read_until(proc, "[cancelled", seen, 20)
        proc.stdin.write(b"And now?\n/quit\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    text = seen + out.decode()
    assert proc.returncode == 0, err
    assert "the partial reply is kept" in text
    assert "You said: And now?" in text  # the chat went on after the cancelled reply
    assert b"Traceback" not in err


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process")
def test_chat_ctrl_c_at_the_prompt_exits() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "metis.cli", "chat", "-m", "anthropic"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
        cwd=ROOT,
    )
    try:
        _read_until(proc, "/quit", "", 20)  # the help line: it waits at the prompt now
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0 and b"Traceback" not in err


# stack --------------------------------------------------------------------------------------


def test_stack_lists_the_stages_in_order_with_their_types(
    capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    assert main(["stack", "anthropic"]) == 0
    out = capsys.readouterr().out
    assert "https://api.anthropic.com/v1/messages" in out and "$ANTHROPIC_API_KEY" in out
    assert "capabilities" in out and "prompt caching" in out
    rows = [line.split() for line in out.splitlines() if re.match(r"\s*\d+\s+[a-z_]+\s", line)]
    expected = [s.name for s in load_stack("anthropic").stages]
    assert [row[1] for row in rows] == expected
    # The kind column: how the engine runs each stage, and the provider part it is.
    kinds = {row[1]: " ".join(row[2:4] if row[3].startswith("(") else row[2:3]) for row in rows}
    assert kinds["invariants"] == kinds["tool_ids"] == kinds["telemetry"] == "hook"
    assert kinds["capability_check"] == "transform" and kinds["retry"] == "wrapper"
    assert kinds["encode"] == "transform (encode)" and kinds["cache_control"] == "transform (edit)"
    assert kinds["normalize"] == "send (reader)" and kinds["transport"] == "send (transport)"
    by_name = {row[1]: " ".join(row[4:] if row[3].startswith("(") else row[3:]) for row in rows}
    assert by_name["encode"].startswith("CanonicalRequest → WireRequest")
    assert "codec=anthropic" in by_name["encode"]
    assert "bytes | ResponseHead → dict[str, Any]" in by_name["decode"]
    assert "dict[str, Any] → StreamEvent" in by_name["normalize"]
    assert "prefix=toolu_" in by_name["tool_ids"]
    assert by_name["transport"].startswith("WireRequest → HTTP")


def test_stack_shows_the_base_url_the_sdks_variable_gives(
    capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where an adapter built now would send: a reader who set OPENAI_BASE_URL (the SDK's
    form, ending in /v1) sees it, and one who did not sees which variable would change it."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert main(["stack", "openai"]) == 0
    assert (
        "endpoint     POST https://api.openai.com/v1/chat/completions; $OPENAI_BASE_URL "
        "replaces the base URL\n" in capsys.readouterr().out
    )
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8900/v1")
    assert main(["stack", "openai"]) == 0
    assert (
        "endpoint     POST http://127.0.0.1:8900/v1/chat/completions; base URL from "
        "$OPENAI_BASE_URL\n" in capsys.readouterr().out
    )


def test_stack_mermaid_is_a_flowchart_of_every_stage(capsys: Any) -> None:
    assert main(["stack", "anthropic", "--mermaid"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "flowchart TB"
    node = re.compile(r'^    \w+(\["[^"]*"\]|\(\["[^"]*"\]\)|\[\("[^"]*"\)\])$')
    edge = re.compile(r'^    \w+ (-->|-\.->)\|"[^"]*"\| \w+$')
    for line in lines[1:]:
        assert node.match(line) or edge.match(line), line
    names = [s.name for s in load_stack("anthropic").stages]
    for i, name in enumerate(names, 1):
        assert any(line.startswith(f'    s{i}["{name}') for line in lines)
    downward = [line for line in lines if " -->|" in line]
    upward = [line for line in lines if " -.->|" in line]
    assert len(downward) == len(upward) == len(names) + 1


def test_stack_takes_a_stack_file(tmp_path: Path, capsys: Any) -> None:
    text = (ROOT / "metis" / "stacks" / "builtin" / "openai.yaml").read_text()
    path = tmp_path / "mine.yaml"
    path.write_text(text.replace("name: openai", "name: mine", 1))
    assert main(["stack", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("mine") and str(path) in out and "openai_chat" in out


# replay and record --------------------------------------------------------------------------


def test_replay_prints_the_tool_call_of_an_anthropic_cassette(capsys: Any) -> None:
    assert main(["replay", str(CASSETTES / "anthropic" / "tool_call_stream.yaml")]) == 0
    out = capsys.readouterr().out
    assert "anthropic claude-sonnet-4-5 (streamed)" in out
    assert 'get_weather({"city": "Paris", "unit": "celsius"})' in out
    assert 'get_weather({"city": "Rome", "unit": "celsius"})' in out
    assert "message.complete     stop=tool_use" in out


def test_replay_json_gives_one_event_per_line(capsys: Any) -> None:
    assert main(["replay", str(CASSETTES / "anthropic" / "tool_call_stream.yaml"), "--json"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert events[0]["type"] == "message.start" and events[-1]["type"] == "message.complete"
    ends = [e for e in events if e["type"] == "tool.use_end"]
    assert [e["final_input"]["city"] for e in ends] == ["Paris", "Rome"]


@pytest.mark.parametrize(
    "cassette", sorted(CASSETTES.glob("*/*.yaml")), ids=lambda p: f"{p.parent.name}/{p.stem}"
)
def test_replay_infers_the_provider_of_every_cassette(cassette: Path, capsys: Any) -> None:
    assert main(["replay", str(cassette)]) == 0
    out = capsys.readouterr().out
    assert "# 1/" in out and f" {cassette.parent.name} " in out
    assert "message.complete" in out


@pytest.mark.slow
def test_record_against_the_emulator_writes_a_replayable_cassette_without_the_key(
    tmp_path: Path,
) -> None:
    secret = "sk-ant-api03-not-a-real-key-0123456789"
    target = tmp_path / "weather.yaml"
    done = cli(
        "record",
        "--provider",
        "anthropic",
        "-m",
        "claude-sonnet-4-5",
        "--prompt",
        "What's the weather in Paris?",
        "--tool",
        "-o",
        str(target),
        "--emulator",
        ANTHROPIC_API_KEY=secret,
    )
    assert done.returncode == 0, done.stderr
    assert "tool.use_end" in done.stdout and f"wrote {target}" in done.stdout
    text = target.read_text()
    assert secret not in text and PLACEHOLDER_KEY not in text and "[REDACTED]" in text
    assert "/v1/messages" in text and "What's the weather in Paris?" in text
    replayed = cli("replay", str(target))
    assert replayed.returncode == 0, replayed.stderr
    assert 'get_weather({"city": "Paris"})' in replayed.stdout


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("openai", "gpt-4o"),
        ("gemini", "gemini-2.5-flash"),
        ("ollama", "qwen3"),
        ("groq", "llama-3.3-70b-versatile"),
    ],
)
def test_record_and_replay_other_providers_in_process(
    provider: str, model: str, tmp_path: Path, capsys: Any, no_keys: None
) -> None:
    target = tmp_path / f"{provider}.yaml"
    args = ["record", "--provider", provider, "-m", model, "--prompt", "Hi there"]
    assert main([*args, "-o", str(target), "--emulator", "--no-stream"]) == 0
    capsys.readouterr()
    assert main(["replay", str(target)]) == 0
    out = capsys.readouterr().out
    assert f"{provider} {model} (not streamed)" in out and "You said: Hi there" in out


def test_recording_an_unknown_model_gets_the_providers_not_found(
    tmp_path: Path, capsys: Any, no_keys: None
) -> None:
    target = tmp_path / "openai.yaml"
    args = ["record", "--provider", "openai", "-m", "gpt-nope", "--prompt", "Hi", "--no-stream"]
    assert main([*args, "-o", str(target), "--emulator"]) == 1
    assert "The model `gpt-nope` does not exist" in capsys.readouterr().err


# emulator -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_emulator_command_is_the_emulators_own() -> None:
    done = cli("emulator", "--help")
    assert done.returncode == 0 and "--faults" in done.stdout and "metis emulator" in done.stdout


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM to a child process")
def test_emulator_command_serves_until_stopped() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "metis.cli", "emulator", "--port", "0", "--seed", "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
        cwd=ROOT,
    )
    try:
        seen = _read_until(proc, "x-emulator-fault", "", 20)  # its last line before serving
        assert "listening on http://127.0.0.1:" in seen
        proc.send_signal(signal.SIGTERM)  # at once: the banner means it is ready for it
        out, _ = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert "served 0 requests" in seen + out.decode()


# errors and output --------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "status", "words"),
    [
        (["frobnicate"], 2, "invalid choice"),
        (["chat"], 2, "-m/--model"),
        (["demo", "--faults", "bogus"], 2, "--faults"),
        (["chat", "-m", "openai", "--max-tokens", "0"], 2, "expected a whole number >= 1"),
        (["stack", "nosuch"], 1, "no built-in stack named 'nosuch'"),
        (["stack", "missing/stack.yaml"], 1, "cannot read stack file"),
        (["replay", "missing.yaml"], 1, "no cassette at missing.yaml"),
        (["replay", "cassettes/anthropic"], 1, "is a folder; name one of its cassettes"),
        (["replay", "README.md"], 1, "is not a cassette"),
        (["replay", "cassettes/anthropic/tool_call.yaml", "--provider", "gemini"], 1, "gemini"),
        (["chat", "-m", "nosuch"], 1, "unknown model 'nosuch'"),
        (
            ["chat", "-m", "opnai:gpt-4o"],
            1,
            "no built-in stack named 'opnai'; did you mean 'openai:gpt-4o'?",
        ),
        (["emulator", "--port", "abc"], 2, "expected a port from 0 to 65535, got 'abc'"),
        (["emulator", "--port", "99999"], 2, "expected a port from 0 to 65535, got '99999'"),
        (["serve", "--config", "x.yaml", "--port", "99999"], 2, "expected a port from 0 to 65535"),
        (["emulator", "--bogus"], 2, "unrecognized arguments: --bogus"),
        (["emulator", "--faults", "bogus", "--port", "0"], 2, "--faults: unknown fault"),
        (["emulator", "--context-tokens", "x", "--port", "0"], 2, "expected PROVIDER=N"),
        (["demo", "--providers", "nosuch"], 1, "no model for nosuch"),
        (
            ["demo", "--providers", "anthropc"],
            1,
            "no model for anthropc in the built-in models; did you mean 'anthropic'?",
        ),
        (["demo", "--models", "missing.yaml"], 1, "missing.yaml"),
        (
            ["record", "--provider", "anthropic", "-m", "x", "--prompt", "hi", "-o", "x.yaml"],
            1,
            "ANTHROPIC_API_KEY",
        ),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_user_errors_are_one_line_and_no_traceback(
    args: list[str], status: int, words: str
) -> None:
    done = cli(*args)
    assert done.returncode == status, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("metis: error: ") and words in lines[0]
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_bad_models_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text("adapters:\n  a: {type: nosuch}\nmodels: {}\n")
    done = cli("chat", "-m", "x", "--models", str(path))
    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1 and "nosuch" in done.stderr


def test_colour_only_on_a_terminal_without_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert Output(Terminal()).style("x", "bold") == "\x1b[1mx\x1b[0m"
    assert Output(StringIO()).style("x", "bold") == "x"
    monkeypatch.setenv("NO_COLOR", "1")
    assert Output(Terminal()).style("x", "bold") == "x"


def test_help_lists_every_command(capsys: Any) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("demo", "chat", "stack", "replay", "record", "emulator"):
        assert command in out


# models -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_models_fall_back_to_the_emulator_without_a_key(no_keys: None) -> None:
    models = Models()
    try:
        target = models.resolve("anthropic")
        assert target.offline and target.reason == "ANTHROPIC_API_KEY is not set"
        assert target.model == "anthropic:claude-sonnet-4-5"
        assert models.emulator is not None
        assert target.adapter.endpoint.base_url == models.emulator.url
        other = models.resolve("mistral:mistral-large-latest")  # any provider:model
        assert other.provider == "mistral" and other.offline
    finally:
        await models.aclose()
    assert models.emulator is None


@pytest.mark.anyio
async def test_models_come_from_a_models_yaml(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(
        "adapters:\n  claude: {type: anthropic, api_key_env: MY_CLAUDE_KEY}\n"
        "models:\n  anthropic:claude-haiku-4-5: {adapter: claude, aliases: [fast]}\n"
    )
    monkeypatch.setenv("MY_CLAUDE_KEY", "sk-ant-test")
    models = Models(str(path))
    try:
        target = models.resolve("fast")
        assert not target.offline and target.name == "anthropic:claude-haiku-4-5"
        assert target.adapter.endpoint.base_url == "https://api.anthropic.com"
        assert models.family_models() == [("anthropic", "anthropic:claude-haiku-4-5")]
        offline = Models(str(path), offline=True)
        try:
            assert offline.resolve("fast").offline
        finally:
            await offline.aclose()
    finally:
        await models.aclose()


def test_prices_come_from_the_model_catalog(no_keys: None) -> None:
    usage = TokenUsage(input_tokens=1_000_000, output_tokens=0)
    models = Models(offline=True)
    try:
        priced = price(models.resolve("openai_responses"), usage)
        assert priced is not None and priced.model == "openai:gpt-4o"  # billed as OpenAI's
        gemini = price(models.resolve("gemini"), usage)
        assert gemini is not None and gemini.model == "google:gemini-2.5-flash"
        assert price(models.resolve("tgi"), usage) is None  # a local server's model
    finally:
        import anyio

        anyio.run(models.aclose)


def test_an_unknown_model_name_says_any_stack_model_is_one_too(no_keys: None) -> None:
    """``metis chat -m sonnet``: the built-in models are a few examples; any model of a
    built-in stack can be named (``anthropic:claude-opus-4-1``), which the error says."""
    from metis.errors import InvalidRequestError

    models = Models(offline=True)
    try:
        with pytest.raises(InvalidRequestError) as caught:
            models.resolve("sonnet")
        assert caught.value.message.startswith("unknown model 'sonnet' in the built-in models")
        assert caught.value.message.endswith(
            "; or any model of a built-in stack as STACK:MODEL (anthropic:claude-sonnet-4-5)"
        )
        assert models.resolve("anthropic:claude-opus-4-1").model == "anthropic:claude-opus-4-1"
    finally:
        import anyio

        anyio.run(models.aclose)


@pytest.mark.slow
def test_stack_imports_the_module_that_registers_custom_stages(tmp_path: Path) -> None:
    (tmp_path / "mystages.py").write_text(
        "from typing import Any\nfrom metis.pipeline import Stage, register_stage\n\n"
        "@register_stage\nclass Shout(Stage[Any, Any, Any, Any]):\n    name = 'shout'\n\n"
        "    async def __call__(self, request, call, inner):  # type: ignore[no-untyped-def]\n"
        "        async for event in inner(request, call):\n            yield event\n",
        encoding="utf-8",
    )
    stack = tmp_path / "mine.yaml"
    stack.write_text(
        "name: mine\nextends: openai\nstages: {insert_after: {invariants: [shout]}}\n",
        encoding="utf-8",
    )
    refused = cli("stack", str(stack))
    assert refused.returncode == 1
    assert refused.stderr.startswith("metis: error:") and "--import" in refused.stderr
    shown = cli("stack", str(stack), "--import", "mystages", PYTHONPATH=str(tmp_path))
    assert shown.returncode == 0 and " shout " in shown.stdout


def test_a_dumb_terminal_gets_no_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    from metis.cli.output import wants_colour

    class Tty:
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert wants_colour(Tty())  # type: ignore[arg-type]
    monkeypatch.setenv("TERM", "dumb")
    assert not wants_colour(Tty())  # type: ignore[arg-type]


@pytest.mark.slow
def test_demo_live_without_keys_names_every_key_to_set() -> None:
    done = cli("demo", "--live", "--pace", "0")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("metis: error: no provider has a key for --live: set ")
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GROQ_API_KEY"):
        assert key in last
    said = done.stdout + done.stderr
    assert "skipping ollama: a local server" in said
    assert "skipping bedrock: no API key; signs with the platform's own credentials" in said
    assert "skipping bedrock: a local server" not in said


@pytest.mark.anyio
async def test_demo_live_takes_a_platform_with_an_optional_key_once_it_is_set(
    no_keys: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from argparse import Namespace

    from metis.cli.demo import _targets

    args = Namespace(live=True, providers=None)
    models = Models()
    try:
        with pytest.raises(CliError, match="no provider has a key for --live"):
            _targets(models, args, Output(StringIO()))
        monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "k")
        chosen = [t.provider for t in _targets(models, args, Output(StringIO()))]
    finally:
        await models.aclose()
    assert chosen == ["bedrock"]


def test_a_warning_during_a_streamed_line_starts_on_a_line_of_its_own(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import logging

    from metis.cli import _warnings_to_stderr
    from metis.cli.output import Output

    out = Output(colour=False)
    with _warnings_to_stderr():
        out.write('→ get_weather({"city": ')
        logging.getLogger("metis").warning("dropped thinking block for openai")
        out.write('"Paris"})')
        out.line()
    captured = capsys.readouterr()
    assert captured.out == '→ get_weather({"city": \n"Paris"})\n'
    assert captured.err == "metis: warning: dropped thinking block for openai\n"


def test_a_gateway_record_names_its_event(capsys: pytest.CaptureFixture[str]) -> None:
    """What docs/gateway.md tells an operator to grep for (``metis.gateway.dropped``,
    ``metis.gateway.store_failed``, ...) is in `metis serve`'s line, not only in the record."""
    import logging

    from metis.cli import _warnings_to_stderr

    with _warnings_to_stderr():
        logging.getLogger("metis.gateway").warning(
            "left out of the request for %s: %s",
            "flash",
            "n",
            extra={"event": "metis.gateway.dropped"},
        )
    said = capsys.readouterr().err
    assert said == "metis: warning: [metis.gateway.dropped] left out of the request for flash: n\n"


def test_an_error_logged_with_its_exception_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    """`metis serve` logs a request that failed inside the gateway this way."""
    import logging

    from metis.cli import _warnings_to_stderr

    with _warnings_to_stderr():
        try:
            raise ConfigError("adapters.aws.settings: unknown setting 'regoin'\n(did you mean?)")
        except ConfigError:
            logging.getLogger("metis").exception("gateway request failed")
    assert capsys.readouterr().err == (
        "metis: error: gateway request failed: ConfigError: "
        "adapters.aws.settings: unknown setting 'regoin'; (did you mean?)\n"
    )


def test_chat_keeps_line_history_between_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readline = pytest.importorskip("readline")
    from metis.cli import chat

    saved: list[Any] = []
    monkeypatch.setattr(chat.atexit, "register", saved.append)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    readline.clear_history()
    chat._line_editing()
    readline.add_history("What's the weather in Paris?")
    (save,) = saved
    save()
    path = tmp_path / "metis" / "chat_history"
    assert "What's the weather in Paris?" in path.read_text(encoding="utf-8")
    readline.clear_history()
    chat._line_editing()  # a new session reads it back
    assert readline.get_history_item(readline.get_current_history_length()) == (
        "What's the weather in Paris?"
    )


def test_the_chat_prompt_marks_its_colour_codes_for_readline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """readline counts every character of the prompt as on screen unless \\001...\\002 say
    otherwise; with the codes counted, editing a long line redraws it in the wrong place."""
    import builtins
    import sys

    from metis.cli import chat

    class Terminal(StringIO):
        def isatty(self) -> bool:
            return True

    prompts: list[str] = []

    def read(prompt: str = "") -> str:
        prompts.append(prompt)
        raise EOFError

    monkeypatch.setattr(sys, "stdin", Terminal())
    monkeypatch.setattr(builtins, "input", read)
    monkeypatch.setattr(chat, "_line_editing", lambda: None)
    chat._loop(None, None, Output(Terminal(), colour=True))  # type: ignore[arg-type]
    assert prompts == ["\x01\x1b[1;32m\x02you>\x01\x1b[0m\x02 "]


def test_a_misspelt_catalog_provider_names_the_nearest(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "--provider", "anthropc"]) != 0
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(
            "no provider 'anthropc' in the model catalog; did you mean 'anthropic' or "
            "'vertex_anthropic' or 'bedrock_anthropic'?"
        )
    )


@pytest.mark.parametrize(
    ("search", "shown"),
    [
        ("openai:gpt-3.5", "openai:gpt-3.5-turbo "),
        ("gemini:gemini-2.5-fl", "google:gemini-2.5-flash "),  # a stack's name, as calls say it
        ("ft:gpt-4o", "openai:ft:gpt-4o "),  # no provider named ft: text in the id
    ],
)
def test_a_model_string_as_the_search_finds_its_models(
    search: str, shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``metis models openai:gpt-3.5`` found 0 models: no id holds its provider."""
    assert main(["models", search, "--limit", "50"]) == 0
    assert shown in capsys.readouterr().out


def test_a_search_that_finds_nothing_names_the_nearest_ids(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``metis models claude-sonet-4-5`` said '0 models' and nothing more."""
    assert main(["models", "claude-sonet-4-5"]) == 0
    assert "0 models; did you mean 'claude-sonnet-4-5'" in capsys.readouterr().out
    assert main(["models", "gemini-2.5-flsh", "--provider", "gemini"]) == 0
    assert "did you mean 'gemini-2.5-flash'" in capsys.readouterr().out


@pytest.mark.parametrize("empty", ["", " "])
def test_an_empty_catalog_provider_is_refused_not_ignored(
    empty: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # It listed every provider's models, as if no --provider had been given.
    assert main(["models", "--provider", empty]) != 0
    assert "--provider: expected a provider name" in capsys.readouterr().err


def test_python_dash_m_metis_is_the_command_line() -> None:
    """``python -m metis ...``, as a user whose virtual environment's scripts are not on PATH
    types it, runs the ``metis`` command."""
    done = subprocess.run(
        [sys.executable, "-m", "metis", "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("metis ")


def test_the_demo_tables_summary_counts_one_provider_in_the_singular() -> None:
    from typing import cast

    from metis.adapter import Adapter
    from metis.cli.demo_table import Row, print_table
    from metis.cli.models import Target

    target = Target("anthropic:x", "anthropic:x", "anthropic", cast(Adapter, None), offline=True)
    stream = StringIO()
    print_table(Output(stream, colour=False), [Row(1, target, "end_turn", 10, 2)])
    assert "1 turn, 1 provider, 10 tokens in, 2 out, " in stream.getvalue()


def test_the_providers_list_names_the_stacks_and_the_keys_metis_reads(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``metis models --providers`` listed the catalog's variables (google: GOOGLE_API_KEY, ...;
    azure: AZURE_API_KEY), which metis does not read: a new user setting one got 'no API key:
    set GEMINI_API_KEY'. Each provider a stack serves names its stacks and their variables."""
    assert main(["models", "--providers"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line}
    assert rows["google"].split()[2:] == ["gemini", "GEMINI_API_KEY"]
    assert "GOOGLE_API_KEY" not in rows["google"]
    assert rows["azure"].split()[2:] == [
        "azure,",
        "azure_responses,",
        "azure_responses_ws",
        "AZURE_OPENAI_API_KEY",
        "(optional)",  # Entra ID does instead
    ]
    assert rows["302ai"].split()[2:] == ["-", "-"]  # no stack: openai_compatible and base_url=
