"""What `metis chat` says: costs in plain digits, a failed command as a chat message."""

from __future__ import annotations

from decimal import Decimal
from io import StringIO
from typing import Any

import pytest

from metis.cli import chat
from metis.cli.output import Output, usd
from metis.core.money import USD
from metis.errors import InvalidRequestError


def test_a_cost_under_a_millionth_shows_its_digits_not_zero() -> None:
    assert usd(USD("0.00000036")) == "$0.00000036"
    assert usd(Decimal("3.6E-7"), estimated=True) == "~$0.00000036"
    assert usd(Decimal("0.000052")) == "$0.000052"
    assert usd(Decimal(0)) == "$0.000000"
    assert usd(None) == "-"


class Portal:
    """Runs what the chat asks of its event loop, here."""

    def call(self, function: Any, *args: Any) -> Any:
        return function(*args)


class Target:
    name = "openai:gpt-4o"


class Chat:
    target = Target()

    def select(self, name: str) -> None:
        raise InvalidRequestError(f"unknown model {name!r} in the built-in models")


def command(text: str, capsys: pytest.CaptureFixture[str]) -> tuple[bool, str, str]:
    out = StringIO()
    going_on = chat._command(Portal(), Chat(), Output(out), text)  # type: ignore[arg-type]
    return going_on, out.getvalue(), capsys.readouterr().err


def test_a_model_switch_that_fails_is_a_chat_message_saying_what_to_type(
    capsys: pytest.CaptureFixture[str],
) -> None:
    going_on, said, err = command("/model gpt", capsys)
    assert going_on and err == ""  # not "metis: error:", which reads as the end of the chat
    assert "unknown model 'gpt'" in said and "invalid_request" not in said
    assert "stays on openai:gpt-4o" in said
    assert "/models" in said and "/model NAME" in said


def test_an_unknown_command_is_a_chat_message_pointing_at_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    going_on, said, err = command("/frob", capsys)
    assert going_on and err == ""
    assert "unknown command /frob" in said and "/help" in said


def test_a_switch_to_a_model_the_catalog_does_not_know_names_the_nearest() -> None:
    """``/model gemini:gemini-2.5-flsh`` switched without a word, and the next message was a
    404; the chat now says the catalog's nearest names at once."""
    import anyio

    from metis.cli import build_parser

    args = build_parser().parse_args(["chat", "-m", "openai:gpt-4o", "--offline"])
    out = StringIO()
    talk = chat.Chat(args, Output(out))

    async def switch() -> None:
        try:
            await talk.select("gemini:gemini-2.5-flsh")
            await talk.select("openai:gpt-4o")
        finally:
            await talk.aclose()

    anyio.run(switch)
    said = out.getvalue()
    assert "'gemini-2.5-flsh' is not in the model catalog for google" in said
    assert "nearest it has: gemini-2.5-flash" in said
    assert said.count("not in the model catalog") == 1  # a model it knows: nothing more


def said_on_select(name: str, *flags: str) -> str:
    import anyio

    from metis.cli import build_parser

    args = build_parser().parse_args(["chat", "-m", name, *flags])
    out = StringIO()
    talk = chat.Chat(args, Output(out))

    async def select() -> None:
        try:
            await talk.select(name)
        finally:
            await talk.aclose()

    anyio.run(select)
    return out.getvalue()


def test_a_model_sent_where_the_sdks_base_url_variable_says_names_that_url_not_live(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With ANTHROPIC_BASE_URL at the emulator the chat said '(live)'."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:8765")
    said = said_on_select("anthropic:claude-sonnet-4-5")
    assert "(live)" not in said
    assert "(at http://127.0.0.1:8765, set by $ANTHROPIC_BASE_URL)" in said
    monkeypatch.delenv("ANTHROPIC_BASE_URL")
    assert "via anthropic (live)" in said_on_select("anthropic:claude-sonnet-4-5")


@pytest.mark.parametrize(
    ("name", "suggested"),
    [("nope:x", None), ("zzz:x", None), ("opnai:x", "openai:x"), ("xia:grok-4", "xai:grok-4")],
)
def test_a_stack_suggested_for_an_unknown_one_is_a_close_spelling_or_none(
    name: str, suggested: str | None
) -> None:
    """``/model nope:x`` suggested 'openai:x'."""
    from metis.cli.models import Models

    with pytest.raises(InvalidRequestError) as caught:
        Models().resolve(name)
    said = str(caught.value)
    assert f"no built-in stack named {name.partition(':')[0]!r}" in said
    if suggested is None:
        assert "did you mean" not in said
    else:
        assert f"did you mean {suggested!r}?" in said
