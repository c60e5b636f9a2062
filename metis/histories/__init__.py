"""Stored conversations in OpenAI Chat or Anthropic Messages request format, in and out.

For applications moving to metis with histories already on disk::

    messages = from_openai_chat(stored["messages"])
    messages = from_anthropic(stored["messages"], system=stored.get("system"),
                              model="claude-sonnet-4-5")
    stored = {"messages": to_openai_chat(messages)}
    body = to_anthropic(messages)                     # {"system": ..., "messages": [...]}

Provider tool ids become canonical ``tu_`` ids, the same id always the same one. Documents and
audio come and go in each format's own form (metis/histories/files.py): a Chat ``file`` id is
OpenAI's, an Anthropic ``file`` source Anthropic's, and each goes back only to its own format.
Server-tool calls and results, citations, custom tool calls and any block of a type metis does
not read (kept whole as an opaque block) come in too (metis/histories/blocks.py), marked as made
by the format's provider (``anthropic``; ``openai`` for Chat), and go back to that format as they
came. To the other format they go as metis sends them to that provider:

========================  ==============================  ===================================
block                     Chat form                       Anthropic form
========================  ==============================  ===================================
server-tool result        text: what was called, what it  verbatim if Anthropic's, else the
                          returned (its call in it)       same text
server-tool call          left out (in its result's text) verbatim if Anthropic's
citation                  ``url_citation`` annotation     verbatim if Anthropic's
                          (one with a URL and a span)
custom tool call          ``type: "custom"`` call         ``tool_use``, input ``{"input"}``
opaque block              as it came, if Chat's           as it came, if Anthropic's
========================  ==============================  ===================================

What one side cannot carry (video, another provider's file id or opaque block, a citation it has
no form for, a server-tool call without its result, reasoning in Chat format) is dropped whole
with the structured ``metis.lossy_projection`` WARN, never silently.
Malformed input (a field of the wrong type, a list that is not one, tool arguments that are
not a JSON object) is an InvalidRequestError naming the message, the block and the field,
never a bare exception. The exports take canonical messages or their dicts
(``metis.MessageDict``).

A tool list in either format is read as ``ToolDefinition`` objects (metis/histories/tools.py)::

    tools = from_openai_tools(stored["tools"])       # Chat's or Responses' function tools
    tools = from_anthropic_tools(stored["tools"])    # {"name", "description", "input_schema"}
"""

from __future__ import annotations

from metis.histories.anthropic import from_anthropic, to_anthropic
from metis.histories.openai_chat import from_openai_chat, to_openai_chat
from metis.histories.tools import from_anthropic_tools, from_openai_tools

__all__ = [
    "from_anthropic",
    "from_anthropic_tools",
    "from_openai_chat",
    "from_openai_tools",
    "to_anthropic",
    "to_openai_chat",
]
