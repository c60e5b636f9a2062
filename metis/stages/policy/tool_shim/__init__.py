"""tool_shim: tool calling for endpoints that only take and give text; the stage is
:mod:`metis.stages.policy.tool_shim.stage`.

One module per concern: ``tags`` (the call and result syntax), ``prompt`` (the text that
offers the tools), ``history`` (a history's calls and results written as text), ``call_json``
(one tag's content as a call), ``reply`` (the streaming parser over the reply), ``stage``.
"""

from metis.stages.policy.tool_shim.call_json import parse_call
from metis.stages.policy.tool_shim.history import text_history, uses_tools
from metis.stages.policy.tool_shim.prompt import NO_TOOLS, into_first_user_turn, preamble
from metis.stages.policy.tool_shim.reply import ToolCallParser, Warn
from metis.stages.policy.tool_shim.stage import MAX_STOP_SEQUENCES, ToolShim
from metis.stages.policy.tool_shim.tags import CLOSE, OPEN, RESULT, render_call, render_result_open

__all__ = [
    "CLOSE",
    "MAX_STOP_SEQUENCES",
    "NO_TOOLS",
    "OPEN",
    "RESULT",
    "ToolCallParser",
    "ToolShim",
    "Warn",
    "into_first_user_turn",
    "parse_call",
    "preamble",
    "render_call",
    "render_result_open",
    "text_history",
    "uses_tools",
]
