"""The nearest option or subcommand to a misspelt one on a command line. argparse says only
"unrecognized arguments" or "invalid choice" (it suggests from Python 3.14 on); every metis
command line says what was meant, as the rest of metis does."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from metis.core.suggest import closest, did_you_mean


def misspelt(parser: argparse.ArgumentParser, args: Sequence[str]) -> str | None:
    """What is wrong in ``args`` that ``parser`` cannot read, with the nearest name it knows:
    its first unknown option, or a subcommand it does not have; None when neither is there."""
    commands = _subcommands(parser)
    for arg in args:
        if arg == "--":
            return None
        if commands and not arg.startswith(tuple(parser.prefix_chars)):  # the subcommand
            if arg in commands:
                return None  # its own parser reads the rest
            hint = did_you_mean(arg, commands)
            return f"unknown command {arg!r}{hint}" if hint else None
        name = _unknown_option(parser, arg)
        if name is not None:
            return f"unrecognized arguments: {name}{_nearest_option(parser, name)}"
    return None


def _nearest_option(parser: argparse.ArgumentParser, name: str) -> str:
    """``did_you_mean`` over the long options, their dashes left out of the comparison (with
    them, ``--bogus`` came out near ``--host``)."""
    options = {o[2:]: o for o in parser._option_string_actions if o.startswith("--")}
    found = closest(name.lstrip(parser.prefix_chars), options)
    return f"; did you mean {' or '.join(repr(options[o]) for o in found)}?" if found else ""


def _unknown_option(parser: argparse.ArgumentParser, arg: str) -> str | None:
    """``arg``'s option name when it reads as an option ``parser`` does not take (argparse's
    own rules: a long option may be abbreviated, a short one carry its value, an argument
    with a space or a negative number is a value)."""
    known = parser._option_string_actions
    if len(arg) < 2 or arg[0] not in parser.prefix_chars or " " in arg:
        return None
    if parser._negative_number_matcher.match(arg) and not parser._has_negative_number_optionals:
        return None
    if arg[1] not in parser.prefix_chars:  # -x, -xVALUE
        return None if arg[:2] in known else arg
    name = arg.split("=", 1)[0]
    if name in known or any(option.startswith(name) for option in known):
        return None
    return name


def _subcommands(parser: argparse.ArgumentParser) -> list[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


class SuggestingParser(argparse.ArgumentParser):
    """An argument parser whose usage errors name the nearest option or subcommand; its
    subclass says how a usage error is raised (:meth:`usage_error`)."""

    def usage_error(self, message: str) -> BaseException:
        return SystemExit(f"{self.prog}: error: {message}")

    def error(self, message: str) -> NoReturn:
        raise _Refused(message, self)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            message = f"unrecognized arguments: {' '.join(extras)}"
            raise self.usage_error(f"{message} (see '{self.prog} --help')")
        return parsed

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        given = list(sys.argv[1:] if args is None else args)
        try:
            parsed, extras = super().parse_known_args(given, namespace)
        except _Refused as refused:
            if refused.parser is not self:
                raise
            problem = misspelt(self, given) or refused.message
            raise self.usage_error(f"{problem} (see '{self.prog} --help')") from None
        unknown = misspelt(self, extras)
        if unknown:
            raise self.usage_error(f"{unknown} (see '{self.prog} --help')")
        return parsed, extras


class _Refused(Exception):
    def __init__(self, message: str, parser: argparse.ArgumentParser) -> None:
        super().__init__(message)
        self.message, self.parser = message, parser
