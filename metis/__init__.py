"""metis: one canonical format for every LLM provider, as a pipeline of small stages.

Names are imported on first use, so ``import metis`` costs almost nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Adapter": "metis.adapter",
    "build_adapter": "metis.adapter",
    "AdapterConfig": "metis.config",
    "Pipeline": "metis.pipeline.pipeline",
    "Stage": "metis.pipeline.stage",
    "RequestStage": "metis.pipeline.stage",
    "Call": "metis.pipeline.call",
    "WireRequest": "metis.pipeline.wire",
    "register_stage": "metis.pipeline.registry",
    "load_stack": "metis.pipeline.stack",
    "InMemoryToolIdStore": "metis.session",
    "ToolIdStore": "metis.session",
    "TelemetrySink": "metis.telemetry",
    "Registry": "metis.registry",
    "Route": "metis.registry",
    "NotConfiguredError": "metis.registry",
    "PriceTable": "metis.cost",
    "Cost": "metis.cost",
    "cost_of": "metis.cost",
    "LoggingSink": "metis.telemetry",
    "ListSink": "metis.telemetry",
    **dict.fromkeys(
        [
            "AdapterCapabilities",
            "Base64ImageSource",
            "CanonicalRequest",
            "CanonicalResponse",
            "ContentBlock",
            "ImageBlock",
            "Message",
            "MessageComplete",
            "MessageStart",
            "ProviderRaw",
            "RedactedThinkingBlock",
            "Role",
            "StopKind",
            "StopReason",
            "StreamEvent",
            "TextBlock",
            "TextDelta",
            "ThinkingBlock",
            "ThinkingConfig",
            "ThinkingDelta",
            "TokenUsage",
            "ToolAnnotations",
            "ToolChoice",
            "ToolDefinition",
            "ToolResultBlock",
            "ToolUseBlock",
            "ToolUseEnd",
            "ToolUseInputDelta",
            "ToolUseStart",
            "URLImageSource",
        ],
        "metis.model",
    ),
    **dict.fromkeys(
        [
            "AdapterError",
            "AuthError",
            "CancelledError",
            "CapabilityError",
            "ConfigError",
            "ContextOverflowError",
            "ErrorClass",
            "InvalidRequestError",
            "InvariantViolation",
            "NetworkError",
            "OverloadedError",
            "ProtocolError",
            "RateLimitError",
            "ServerError",
            "StackError",
        ],
        "metis.errors",
    ),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'metis' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from metis.adapter import Adapter, build_adapter
    from metis.config import AdapterConfig
    from metis.cost import Cost, PriceTable, cost_of
    from metis.errors import (
        AdapterError,
        AuthError,
        CancelledError,
        CapabilityError,
        ConfigError,
        ContextOverflowError,
        ErrorClass,
        InvalidRequestError,
        InvariantViolation,
        NetworkError,
        OverloadedError,
        ProtocolError,
        RateLimitError,
        ServerError,
        StackError,
    )
    from metis.model import (
        AdapterCapabilities,
        Base64ImageSource,
        CanonicalRequest,
        CanonicalResponse,
        ContentBlock,
        ImageBlock,
        Message,
        MessageComplete,
        MessageStart,
        ProviderRaw,
        RedactedThinkingBlock,
        Role,
        StopKind,
        StopReason,
        StreamEvent,
        TextBlock,
        TextDelta,
        ThinkingBlock,
        ThinkingConfig,
        ThinkingDelta,
        TokenUsage,
        ToolAnnotations,
        ToolChoice,
        ToolDefinition,
        ToolResultBlock,
        ToolUseBlock,
        ToolUseEnd,
        ToolUseInputDelta,
        ToolUseStart,
        URLImageSource,
    )
    from metis.pipeline.call import Call
    from metis.pipeline.pipeline import Pipeline
    from metis.pipeline.registry import register_stage
    from metis.pipeline.stack import load_stack
    from metis.pipeline.stage import RequestStage, Stage
    from metis.pipeline.wire import WireRequest
    from metis.registry import NotConfiguredError, Registry, Route
    from metis.session import InMemoryToolIdStore, ToolIdStore
    from metis.telemetry import ListSink, LoggingSink, TelemetrySink
