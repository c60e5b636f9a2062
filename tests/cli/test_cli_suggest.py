"""A misspelt option or subcommand on any metis command line is named with the nearest one
it meant (argparse alone says "unrecognized arguments" or "invalid choice")."""

from __future__ import annotations

import pytest

from metis.cli import main


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["serve", "--confg", "x"], "unrecognized arguments: --confg; did you mean '--config'?"),
        (["serve", "--config", "x", "--prot", "9"], "--prot; did you mean '--port'"),
        (["serve", "--confg=x"], "--confg; did you mean '--config'?"),
        (["sevre", "--config", "x"], "unknown command 'sevre'; did you mean 'serve'?"),
        (["--verison"], "--verison; did you mean '--version'?"),
        (["models", "--limt", "3"], "--limt; did you mean '--limit'?"),
        (["chat", "-m", "x", "--sytem", "hi"], "--sytem; did you mean '--system'"),
        (["demo", "--provders", "openai"], "did you mean '--providers'"),
        (["stack", "anthropic", "--mermiad"], "did you mean '--mermaid'?"),
        (["replay", "c.yaml", "--jsno"], "did you mean '--json'?"),
        (["record", "--provder", "x"], "did you mean '--provider'"),
        (["emulator", "--prot", "0"], "--prot; did you mean '--port'"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_a_misspelt_name_is_answered_with_the_nearest(
    args: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert words in err
    assert err.startswith("metis: error: ") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["frobnicate"], "invalid choice: 'frobnicate'"),  # nothing near: the choices listed
        (["serve", "--xyzzy", "1", "--config", "x"], "unrecognized arguments: --xyzzy ("),
        # only the dashes alike: "--bogus" was once near "--host"
        (["serve", "--config", "x", "--bogus"], "unrecognized arguments: --bogus ("),
        (["stack", "anthropic", "extra"], "unrecognized arguments: extra"),
    ],
)
def test_without_a_near_name_the_error_stays_argparses(
    args: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert words in err and "did you mean" not in err


def test_an_abbreviated_option_and_a_negative_value_are_not_misspellings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["models", "--lim", "-3"]) == 2  # --lim is --limit; -3 is its (bad) value
    err = capsys.readouterr().err
    assert "expected a whole number >= 1, got '-3'" in err and "did you mean" not in err
