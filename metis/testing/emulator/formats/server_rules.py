"""What the APIs refuse of server tools' blocks sent back in a history (docs/contract.md §11).

Anthropic: search results (and citations) whose encrypted contents this emulator did not issue
are refused (unless ``strict_signatures`` is off); a server tool's result without its
``server_tool_use`` before it in the same assistant message is the library's rule
(metis/wire/anthropic/rules.py ``tool_pairs``), read by the client too.

Converse (Nova 2's system tools): a ``toolResult`` of ``type: "nova_code_interpreter_result"``
goes back in the assistant message that holds its ``toolUse`` of ``type: "server_tool_use"``,
after it; ``citationsContent`` only in an assistant message.
"""

from __future__ import annotations

from typing import Any

from metis.testing.emulator.formats.server_converse import CODE_RESULT, SERVER_CALL
from metis.testing.emulator.rules import Refused
from metis.testing.emulator.server_tools import SEARCH_KIND
from metis.testing.emulator.wire import verify
from metis.wire.anthropic.tool_pairs import SERVER_RESULTS


def anthropic(body: dict[str, Any], call: Any) -> None:
    """What was encrypted comes back as issued (where each result goes is the library's rule:
    metis/wire/anthropic/rules.py ``tool_pairs``)."""
    if call is not None and not call.env.strict_signatures:
        return
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content") if isinstance(message, dict) else None
        for j, block in enumerate(content if isinstance(content, list) else []):
            kind = block.get("type") if isinstance(block, dict) else None
            where = f"messages.{i}.content.{j}"
            if kind in SERVER_RESULTS:
                _check_encrypted(block, where)
            elif kind == "text":
                for k, cited in enumerate(block.get("citations") or []):
                    _check_index(cited, f"{where}.citations.{k}")


def _check_encrypted(block: dict[str, Any], where: str) -> None:
    found = block.get("content")
    for k, result in enumerate(found if isinstance(found, list) else []):
        if isinstance(result, dict) and result.get("type") == "web_search_result":
            sealed = result.get("encrypted_content")
            if not isinstance(sealed, str) or not verify(
                SEARCH_KIND, str(result.get("url")), sealed
            ):
                raise Refused(f"{where}.content.{k}: Invalid `encrypted_content`")


def _check_index(cited: Any, where: str) -> None:
    if isinstance(cited, dict) and cited.get("type") == "web_search_result_location":
        sealed = cited.get("encrypted_index")
        if not isinstance(sealed, str) or not verify(SEARCH_KIND, str(cited.get("url")), sealed):
            raise Refused(f"{where}: Invalid `encrypted_index`")


def converse(i: int, role: str, blocks: list[tuple[int, str, Any]]) -> set[str]:
    """The server calls a message answers itself; refuses a result echoed without its call, or
    outside an assistant message."""
    calls: set[str] = set()
    for j, kind, value in blocks:
        if kind == "toolUse" and isinstance(value, dict) and value.get("type") == SERVER_CALL:
            calls.add(str(value.get("toolUseId")))
        elif kind == "toolResult" and isinstance(value, dict) and value.get("type") == CODE_RESULT:
            if role != "assistant" or value.get("toolUseId") not in calls:
                raise Refused(
                    f"messages.{i}.content.{j}.toolResult: a toolResult of type {CODE_RESULT} "
                    f"must follow the toolUse of type {SERVER_CALL} with toolUseId "
                    f"{value.get('toolUseId')} in the same assistant message."
                )
        elif kind == "citationsContent" and role != "assistant":
            raise Refused(f"messages.{i}.content.{j}.citationsContent: only in assistant messages")
    return calls
