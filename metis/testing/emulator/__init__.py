"""metis.testing.emulator: every provider's wire format behind one request handler, on a
loopback socket or in process, answered by a scripted model, a script, or a function.

For demos, integration tests over real sockets or none, chaos tests and benchmarks; never
where a real provider is configured. It is written from the providers' documentation and
recorded traffic, independently of metis's codecs, so it is a second opinion on the formats.

    from metis.testing.emulator import Emulator

    with Emulator(faults="rate_limit:0.1,drop:0.05", seed=7) as emulator:
        adapter = build_adapter("anthropic", AdapterConfig(api_key="test",
                                                          base_url=emulator.base_url("anthropic")))
        ...
        print(emulator.stats)

What it serves, answers and refuses: docs/emulator.md (``metis emulator --help`` lists the
endpoints); faults: :mod:`.faults`; scripts and function models: :mod:`.script`; each API's
400 rules: the tables in ``tables/`` (read by :mod:`.rules`) and the checks of the
``*_rules`` modules of :mod:`.formats`.
"""

from __future__ import annotations

from metis.testing.emulator.cli import main
from metis.testing.emulator.emulator import Emulator
from metis.testing.emulator.faults import Fault, FaultPlan, FaultRule, FaultSpecError, parse_faults
from metis.testing.emulator.formats import ALIASES as PROVIDER_ALIASES
from metis.testing.emulator.handler import FAULT_HEADER, RecordedRequest, Stats
from metis.testing.emulator.model import CallOut, Prompt, Reply
from metis.testing.emulator.responder import Responder
from metis.testing.emulator.script import FunctionModel, Script, ScriptError, text, thinking, tools
from metis.testing.emulator.server_tools import code_execution, web_fetch, web_search
from metis.testing.emulator.stand_in import MODELS, StandIn, stand_in
from metis.testing.emulator.transport import EmulatorTransport

__all__ = [
    "FAULT_HEADER",
    "MODELS",
    "PROVIDER_ALIASES",
    "CallOut",
    "Emulator",
    "EmulatorTransport",
    "Fault",
    "FaultPlan",
    "FaultRule",
    "FaultSpecError",
    "FunctionModel",
    "Prompt",
    "RecordedRequest",
    "Reply",
    "Responder",
    "Script",
    "ScriptError",
    "StandIn",
    "Stats",
    "code_execution",
    "main",
    "parse_faults",
    "stand_in",
    "text",
    "thinking",
    "tools",
    "web_fetch",
    "web_search",
]
