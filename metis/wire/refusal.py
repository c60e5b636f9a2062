"""What a provider says when it refuses a request: the finding the rules of metis/wire/rules.py
(and the modules it names) give, read by both of their users.

- The client's ``pre_send_check`` stage reports every refusal a request would get, each in the
  provider's own words (which name where the problem is), before the request is sent.
- The emulator (metis/testing/emulator, docs/emulator.md) answers with the first, as the
  provider's error: its status, its words, and OpenAI's ``param`` and ``code``.

A rule is a function from the encoded body to the refusals it finds, in the order the
provider checks (a generator: a request it accepts costs no list).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple


class Refusal(NamedTuple):
    """One refusal a provider would give the request, as a rule finds it."""

    message: str
    """The provider's words, naming where the problem is as the provider names it."""
    param: str | None = None
    """OpenAI's ``param``: the field at fault."""
    code: str | None = None
    """OpenAI's ``code``."""
    status: int = 400
    """The HTTP status the provider answers it with."""

    def problem(self) -> str:
        """As the client reports it: the words, after OpenAI's ``param`` when there is one (the
        other providers' words name the place)."""
        words = self.message.rstrip()  # Gemini's end with a newline
        return f"{self.param}: {words}" if self.param else words


Finder = Callable[[dict[str, Any]], Iterable[Refusal]]
"""A rule: the refusals an encoded body gets, in the order the provider checks."""
