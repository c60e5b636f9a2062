"""Terminal output for the command line: colour only on a terminal, tables, one-line errors.

Colour (ANSI) is used only when the stream is a terminal and ``NO_COLOR`` is unset or empty
(https://no-color.org); piped output is plain text.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import TextIO


class CliError(Exception):
    """A user error: printed as one ``metis: error:`` line, exit status ``status``."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def import_modules(modules: Sequence[str]) -> None:
    """Import the modules that register a user's stages (``@register_stage``), for
    ``--import``; the current folder is searched first, as ``python -m`` would."""
    import importlib

    if modules and "" not in sys.path:
        sys.path.insert(0, "")
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise CliError(f"--import {module}: {exc}") from None


_CODES = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
}
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def for_readline(prompt: str) -> str:
    """``prompt`` with each colour code between ``\\001`` and ``\\002``, which tell readline
    the code takes no room on screen (else it miscounts the prompt's width and redraws an
    edited line in the wrong place)."""
    return ANSI.sub(lambda code: f"\001{code.group(0)}\002", prompt)


def wants_colour(stream: TextIO) -> bool:
    """Colour on a terminal, unless NO_COLOR is set or the terminal is ``TERM=dumb``."""
    isatty = getattr(stream, "isatty", None)
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return bool(isatty and isatty())


class Output:
    """Writes to a stream, with colour when :func:`wants_colour` says so. It remembers when a
    line was left open (a reply streaming), so a warning can start on a line of its own."""

    open_line: bool = False
    """Some output on standard output has not yet ended its line (shared by every Output)."""

    def __init__(self, stream: TextIO | None = None, *, colour: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.colour = wants_colour(self.stream) if colour is None else colour

    def style(self, text: str, *styles: str) -> str:
        if not self.colour or not styles or not text:
            return text
        codes = ";".join(_CODES[s] for s in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"

    def write(self, text: str = "", *styles: str) -> None:
        self.stream.write(self.style(text, *styles))
        self.stream.flush()
        if text:
            Output.open_line = not text.endswith("\n")

    def line(self, text: str = "", *styles: str) -> None:
        self.stream.write(self.style(text, *styles) + "\n")
        self.stream.flush()
        Output.open_line = False

    def table(
        self, headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int] = ()
    ) -> None:
        """A plain-text table; ``right`` lists the columns aligned right (numbers)."""
        for text in table_lines(headers, rows, right=right, styled=self.style):
            self.line(text)


def table_lines(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: Sequence[int] = (),
    styled: Callable[[str, str], str] | None = None,
) -> list[str]:
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def fmt(cells: Sequence[str]) -> str:
        parts = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(cells)
        ]
        return "  ".join(parts).rstrip()

    head = fmt(headers)
    if styled is not None:
        head = styled(head, "bold")
    rule = "  ".join("-" * w for w in widths)
    return [head, rule, *(fmt(row) for row in rows)]


def one_line(message: object) -> str:
    """A message on one line (multi-line config errors are joined with "; ")."""
    parts = [p.strip() for p in str(message).splitlines() if p.strip()]
    return "; ".join(parts) or type(message).__name__


def error(message: object) -> None:
    """``metis: error: ...``, one line on stderr."""
    err = Output(sys.stderr)
    err.line(err.style("metis: error:", "red", "bold") + " " + one_line(message))


def note(out: Output, message: str) -> None:
    out.line(f"({message})", "dim")


def usd(amount: Decimal | None, *, estimated: bool = False) -> str:
    if amount is None:
        return "-"
    # Six places, or eight for an amount under a millionth (the price table's precision).
    text = f"${amount:.8f}" if 0 < abs(amount) < Decimal("0.000001") else f"${amount:.6f}"
    return f"~{text}" if estimated else text


def duration(ms: float) -> str:
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"
