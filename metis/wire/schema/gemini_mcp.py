"""Calls Gemini ran itself: a ``functionCall`` part its own reply answers with a
``functionResponse`` part of the same name (and id, when both carry one), as the MCP servers a
request declares in ``tools[{mcpServers}]`` are called (docs/contract.md §11).

A call is held until the part after it shows whether a response follows: a run of calls, then
the run of responses after it, are read together once another part comes (or the reply ends).
Answered calls become server-tool calls and their responses server-tool results, each keeping
its part to go back verbatim; the others stay the application's tool calls, and a response
answering none stays an opaque part, as before.
"""

from __future__ import annotations

import json
from typing import Any

from metis.core.ids import new_ulid
from metis.model.content import ProviderRaw
from metis.model.server_tools import ServerToolCallBlock, ServerToolResultBlock
from metis.wire.read import malformed

Read = tuple[dict[str, Any], ServerToolCallBlock | ServerToolResultBlock | None]
"""A held part, in reply order, and its server block; None: read it as it would be alone."""

RESPONSE = "functionResponse"


class HeldCalls:
    """The calls (and responses after them) not read yet, for the schema parser."""

    __slots__ = ("_answers", "_calls", "_made", "_token")

    def __init__(self) -> None:
        self._calls: list[dict[str, Any]] = []
        self._answers: list[dict[str, Any]] = []
        self._made = 0  # server calls read in this reply (their minted ids)
        self._token: str | None = None  # in minted ids when the reply has no id

    @property
    def answered(self) -> bool:
        """A response is held: a call now starts a new run."""
        return bool(self._answers)

    def hold(self, part: dict[str, Any], where: str) -> None:
        """Holds a call part, checked as it would be read now."""
        call = part.get("functionCall")
        name = call.get("name") if isinstance(call, dict) else None
        if name.__class__ is not str or not name:
            raise malformed(f"{where} tool call name", "a name", name or None)
        args = call.get("args") if isinstance(call, dict) else None
        if args is not None and not isinstance(args, dict):
            raise malformed(f"{where} tool call input", "an object", args)
        self._calls.append(part)

    def answer(self, part: dict[str, Any]) -> bool:
        """Holds a response part after held calls; False when nothing is held for it."""
        if not self._calls or RESPONSE not in part:
            return False
        self._answers.append(part)
        return True

    def take(self, response_id: str | None) -> list[Read]:
        """The held parts in reply order, each with its server block if it has one."""
        calls, answers = self._calls, self._answers
        self._calls, self._answers = [], []
        made: list[ServerToolCallBlock | None] = [None] * len(calls)
        results: list[ServerToolResultBlock | None] = []
        for answer in answers:
            at = self._match(calls, made, answer[RESPONSE])
            if at is None:
                results.append(None)
                continue
            made[at] = call = self._server_call(calls[at], response_id)
            results.append(_result(answer, call))
        return [*zip(calls, made, strict=True), *zip(answers, results, strict=True)]

    def _match(self, calls: list[dict[str, Any]], made: list[Any], response: Any) -> int | None:
        if not isinstance(response, dict):
            return None
        name, given = response.get("name"), response.get("id")
        if not isinstance(name, str) or not name:
            return None
        for at, part in enumerate(calls):
            call = part.get("functionCall")
            if made[at] is not None or not isinstance(call, dict) or call.get("name") != name:
                continue
            if given and call.get("id") and given != call.get("id"):
                continue
            return at
        return None

    def _server_call(self, part: dict[str, Any], response_id: str | None) -> ServerToolCallBlock:
        call = part["functionCall"]
        self._made += 1
        given = call.get("id")
        if response_id is None:
            self._token = response_id = self._token or new_ulid().lower()
        call_id = given if isinstance(given, str) and given else f"mcp_{response_id}_{self._made}"
        args = call.get("args")
        return ServerToolCallBlock(
            id=call_id,
            name=call["name"],
            input=args if isinstance(args, dict) else {},
            provider_raw=ProviderRaw(provider="gemini", data={"part": part}),
        )


def _result(part: dict[str, Any], call: ServerToolCallBlock) -> ServerToolResultBlock:
    response = part[RESPONSE].get("response")
    error = response.get("error") if isinstance(response, dict) else None
    if error is not None and not isinstance(error, str):
        error = json.dumps(error, ensure_ascii=False, sort_keys=True)
    return ServerToolResultBlock(
        tool_call_id=call.id,
        name=call.name,
        error=error,
        provider_raw=ProviderRaw(provider="gemini", data={"part": part}),
    )
