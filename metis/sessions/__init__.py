"""Sessions: one conversation as an object, and the agent loop (docs/sessions.md).

::

    import metis

    session = metis.Session("anthropic:claude-sonnet-4-5", tools=[get_weather])
    result = session.run("What's the weather in Paris and Rome?")
    print(result.text, result.usage, result.cost_usd)
    session.model = "openai:gpt-4o"                  # the rest of the conversation elsewhere
    print(session.send("And tomorrow?").text)
    saved = session.to_json()                         # ... and on another worker:
    session = metis.Session.from_json(saved, tools=[get_weather])

Three lifetimes (docs/contract.md §1): the adapter (or router) is the application's, shared by
any number of sessions and stateless per call; a session owns one conversation and has one
owner (one turn at a time); a turn's events are read once.
"""

from __future__ import annotations

from metis.sessions.context import Compact, Compactor, ContextBudget, ContextCheck
from metis.sessions.events import (
    CompactionCall,
    RunComplete,
    RunEnd,
    RunEvent,
    RunResult,
    StepComplete,
    StepStart,
    ToolResultEvent,
)
from metis.sessions.session import Session, SessionBusyError

__all__ = [
    "Compact",
    "CompactionCall",
    "Compactor",
    "ContextBudget",
    "ContextCheck",
    "RunComplete",
    "RunEnd",
    "RunEvent",
    "RunResult",
    "Session",
    "SessionBusyError",
    "StepComplete",
    "StepStart",
    "ToolResultEvent",
]
