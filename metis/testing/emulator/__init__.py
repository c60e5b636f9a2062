"""metis.testing.emulator: a real HTTP server on loopback that speaks each provider's wire
format.

For demos, integration tests over real sockets, chaos tests and benchmarks; never where a real
provider is configured. It is written from the providers' documentation and recorded traffic,
independently of metis's codecs, so it is a second opinion on the formats.

    from metis.testing.emulator import Emulator

    with Emulator(faults="rate_limit:0.1,drop:0.05", seed=7) as emulator:
        adapter = build_adapter("anthropic", AdapterConfig(api_key="test",
                                                          base_url=emulator.base_url("anthropic")))
        ...
        print(emulator.stats)

Endpoints: Anthropic ``POST /v1/messages``; OpenAI ``POST /v1/chat/completions`` (which also
serves the OpenAI-compatible stacks: DeepSeek, Groq, Mistral, OpenRouter, Together, vLLM,
llama.cpp, TGI) and ``POST /v1/responses``; Gemini
``POST /v1beta/models/{model}:generateContent`` and ``:streamGenerateContent?alt=sse``; Ollama
``POST /api/chat``, ``POST /api/show``, ``GET /api/tags``, ``GET /api/version``; AWS Bedrock
``POST /model/{id}/converse``, ``/converse-stream``, ``/invoke`` and
``/invoke-with-response-stream`` (SigV4 or a Bedrock API key). Faults: see
:mod:`metis.testing.emulator.faults`; the scripted model: see
:mod:`metis.testing.emulator.responder`.
Command line: ``python -m metis.testing.emulator --port 8900``.
"""

from __future__ import annotations

from metis.testing.emulator.cli import main
from metis.testing.emulator.faults import Fault, FaultPlan, FaultRule, FaultSpecError, parse_faults
from metis.testing.emulator.server import FAULT_HEADER, Emulator, RecordedRequest, Stats
from metis.testing.emulator.stand_in import MODELS, StandIn, stand_in

__all__ = [
    "FAULT_HEADER",
    "MODELS",
    "Emulator",
    "Fault",
    "FaultPlan",
    "FaultRule",
    "FaultSpecError",
    "RecordedRequest",
    "StandIn",
    "Stats",
    "main",
    "parse_faults",
    "stand_in",
]
