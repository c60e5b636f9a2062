"""Nova 2's system tools in Converse replies (:mod:`..server_tools` writes them once).

``nova_code_interpreter`` runs inside the turn: the assistant message holds ``toolUse{toolUseId,
name, input: {code}, type: "server_tool_use"}`` and then ``toolResult{toolUseId, type:
"nova_code_interpreter_result", status, content: [{text: JSON of stdOut, stdErr, exitCode,
isError}]}``; streamed, each opens with a ``contentBlockStart`` naming its type, the input
in ``toolUse`` deltas, the result in ``toolResult`` deltas. ``nova_grounding`` shows no call:
the answer's text is followed by a ``citationsContent`` block citing ``location.web{url,
domain}`` per source (streamed as ``citation`` deltas). Both go back verbatim in the
assistant turn (what Converse refuses of them: :mod:`.server_rules`). Sources: botocore
``bedrock-runtime/2023-09-30/service-2.json`` (``ToolUseBlock.type``, ``ToolResultBlock.type``,
``ContentBlockStart``, ``ToolResultBlockDelta``, ``CitationsContentBlock``, ``CitationsDelta``,
``WebLocation``);
https://docs.aws.amazon.com/nova/latest/nova2-userguide/web-grounding.html.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from metis.testing.emulator.formats.server_openai import cited
from metis.testing.emulator.model import Reply
from metis.testing.emulator.wire import Ids, dumps, split_json

SERVER_CALL = "server_tool_use"
CODE_RESULT = "nova_code_interpreter_result"


def code_blocks(reply: Reply, ids: Ids, issued: list[str]) -> list[dict[str, Any]]:
    """Each code run of the reply as its ``toolUse`` and ``toolResult``."""
    blocks: list[dict[str, Any]] = []
    for out in reply.server:
        if out.name != "code_execution":
            continue
        issued.append(tool_id := "tooluse_" + ids.token(22, "alnum"))
        use = {"toolUseId": tool_id, "name": "nova_code_interpreter", "input": dict(out.input)}
        ran = {"stdOut": out.stdout, "stdErr": out.stderr, "exitCode": out.exit_code,
               "isError": out.exit_code != 0}  # fmt: skip
        result = {
            "toolUseId": tool_id,
            "type": CODE_RESULT,
            "status": "success" if out.exit_code == 0 else "error",
            "content": [{"text": json.dumps(ran)}],
        }
        blocks += [{"toolUse": {**use, "type": SERVER_CALL}}, {"toolResult": result}]
    return blocks


def citations_block(reply: Reply, documents: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """The ``citationsContent`` block that follows grounded text (none when nothing is cited):
    the web sources, then ``documents``' citations."""
    found = [
        {"location": {"web": {"url": url, "domain": urlsplit(url).hostname or url}}}
        for url, _ in cited(reply)
    ] + list(documents)
    return [{"citationsContent": {"citations": found}}] if found else []


def server_block_events(index: int, block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A server block's start and deltas (the caller emits its ``contentBlockStop``); none for
    any other block."""
    at = {"contentBlockIndex": index}
    deltas: list[dict[str, Any]]
    if "citationsContent" in block:
        deltas = [{"citation": c} for c in block["citationsContent"]["citations"]]
        return [("contentBlockDelta", {**at, "delta": d}) for d in deltas]
    use, result = block.get("toolUse"), block.get("toolResult")
    if isinstance(use, dict) and use.get("type") == SERVER_CALL:
        start = {"toolUse": {k: use[k] for k in ("toolUseId", "name", "type")}}
        deltas = [{"toolUse": {"input": p}} for p in split_json(dumps(use["input"]).decode())]
    elif isinstance(result, dict):
        start = {"toolResult": {k: result[k] for k in ("toolUseId", "type", "status")}}
        deltas = [{"toolResult": list(result["content"])}]
    else:
        return []
    events = [("contentBlockStart", {**at, "start": start})]
    return events + [("contentBlockDelta", {**at, "delta": d}) for d in deltas]
