"""metis: one canonical format for every LLM provider, as a pipeline of small stages.

Names are imported on first use, so ``import metis`` costs almost nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "complete": "metis.calls",
    "acomplete": "metis.calls",
    "stream": "metis.calls",
    "astream": "metis.calls",
    "count_tokens": "metis.calls",
    "acount_tokens": "metis.calls",
    "CallOptions": "metis.calls",
    "TokenCount": "metis.adapter.count_tokens",
    "UnknownOptionError": "metis.core.options",
    "MessageDict": "metis.model.dicts",
    "tool": "metis.tools",
    "Tool": "metis.tools",
    "run_tools": "metis.tools",
    "arun_tools": "metis.tools",
    "Adapter": "metis.adapter",
    "build_adapter": "metis.adapter",
    "AdapterConfig": "metis.pipeline.config",
    "Pipeline": "metis.pipeline.pipeline",
    "Stage": "metis.pipeline.stage",
    "Inner": "metis.pipeline.stage",
    "RequestStage": "metis.pipeline.stage",
    "Call": "metis.pipeline.call",
    "StageServices": "metis.pipeline.services",
    "WireRequest": "metis.pipeline.request",
    "ResponseHead": "metis.pipeline.request",
    "register_stage": "metis.pipeline.registry",
    "load_stack": "metis.stacks.loader",
    "InMemoryToolIdStore": "metis.pipeline.stores",
    "ToolIdStore": "metis.pipeline.stores",
    "TelemetrySink": "metis.telemetry",
    "Registry": "metis.registry",
    "Router": "metis.routing",
    "Route": "metis.registry",
    "NotConfiguredError": "metis.registry",
    "PriceTable": "metis.cost",
    "Cost": "metis.cost",
    "cost_of": "metis.cost",
    "LoggingSink": "metis.telemetry",
    "ListSink": "metis.telemetry",
    "OpenTelemetrySink": "metis.telemetry",
    **dict.fromkeys(
        [
            "AdapterCapabilities",
            "AudioBlock",
            "Base64ImageSource",
            "Base64Source",
            "CanonicalRequest",
            "CanonicalResponse",
            "ContentBlock",
            "DocumentBlock",
            "FileIdSource",
            "FreeformInput",
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
            "TextSource",
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
            "URLSource",
            "VideoBlock",
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
            "OutputValidationError",
            "OverloadedError",
            "ProtocolError",
            "RateLimitError",
            "RedirectError",
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
    from metis.adapter.adapter import Adapter as Adapter
    from metis.adapter.adapter import build_adapter as build_adapter
    from metis.adapter.count_tokens import TokenCount as TokenCount
    from metis.calls import CallOptions as CallOptions
    from metis.calls import acomplete as acomplete
    from metis.calls import acount_tokens as acount_tokens
    from metis.calls import astream as astream
    from metis.calls import complete as complete
    from metis.calls import count_tokens as count_tokens
    from metis.calls import stream as stream
    from metis.core.options import UnknownOptionError as UnknownOptionError
    from metis.cost import Cost as Cost
    from metis.cost import PriceTable as PriceTable
    from metis.cost import cost_of as cost_of
    from metis.errors import AdapterError as AdapterError
    from metis.errors import AuthError as AuthError
    from metis.errors import CancelledError as CancelledError
    from metis.errors import CapabilityError as CapabilityError
    from metis.errors import ConfigError as ConfigError
    from metis.errors import ContextOverflowError as ContextOverflowError
    from metis.errors import ErrorClass as ErrorClass
    from metis.errors import InvalidRequestError as InvalidRequestError
    from metis.errors import InvariantViolation as InvariantViolation
    from metis.errors import NetworkError as NetworkError
    from metis.errors import OutputValidationError as OutputValidationError
    from metis.errors import OverloadedError as OverloadedError
    from metis.errors import ProtocolError as ProtocolError
    from metis.errors import RateLimitError as RateLimitError
    from metis.errors import RedirectError as RedirectError
    from metis.errors import ServerError as ServerError
    from metis.errors import StackError as StackError
    from metis.model import AdapterCapabilities as AdapterCapabilities
    from metis.model import AudioBlock as AudioBlock
    from metis.model import Base64ImageSource as Base64ImageSource
    from metis.model import Base64Source as Base64Source
    from metis.model import CanonicalRequest as CanonicalRequest
    from metis.model import CanonicalResponse as CanonicalResponse
    from metis.model import ContentBlock as ContentBlock
    from metis.model import DocumentBlock as DocumentBlock
    from metis.model import FileIdSource as FileIdSource
    from metis.model import FreeformInput as FreeformInput
    from metis.model import ImageBlock as ImageBlock
    from metis.model import Message as Message
    from metis.model import MessageComplete as MessageComplete
    from metis.model import MessageStart as MessageStart
    from metis.model import ProviderRaw as ProviderRaw
    from metis.model import RedactedThinkingBlock as RedactedThinkingBlock
    from metis.model import Role as Role
    from metis.model import StopKind as StopKind
    from metis.model import StopReason as StopReason
    from metis.model import StreamEvent as StreamEvent
    from metis.model import TextBlock as TextBlock
    from metis.model import TextDelta as TextDelta
    from metis.model import TextSource as TextSource
    from metis.model import ThinkingBlock as ThinkingBlock
    from metis.model import ThinkingConfig as ThinkingConfig
    from metis.model import ThinkingDelta as ThinkingDelta
    from metis.model import TokenUsage as TokenUsage
    from metis.model import ToolAnnotations as ToolAnnotations
    from metis.model import ToolChoice as ToolChoice
    from metis.model import ToolDefinition as ToolDefinition
    from metis.model import ToolResultBlock as ToolResultBlock
    from metis.model import ToolUseBlock as ToolUseBlock
    from metis.model import ToolUseEnd as ToolUseEnd
    from metis.model import ToolUseInputDelta as ToolUseInputDelta
    from metis.model import ToolUseStart as ToolUseStart
    from metis.model import URLImageSource as URLImageSource
    from metis.model import URLSource as URLSource
    from metis.model import VideoBlock as VideoBlock
    from metis.model.dicts import MessageDict as MessageDict
    from metis.pipeline.call import Call as Call
    from metis.pipeline.config import AdapterConfig as AdapterConfig
    from metis.pipeline.pipeline import Pipeline as Pipeline
    from metis.pipeline.registry import register_stage as register_stage
    from metis.pipeline.request import ResponseHead as ResponseHead
    from metis.pipeline.request import WireRequest as WireRequest
    from metis.pipeline.services import StageServices as StageServices
    from metis.pipeline.stage import Inner as Inner
    from metis.pipeline.stage import RequestStage as RequestStage
    from metis.pipeline.stage import Stage as Stage
    from metis.pipeline.stores import InMemoryToolIdStore as InMemoryToolIdStore
    from metis.pipeline.stores import ToolIdStore as ToolIdStore
    from metis.registry.registry import NotConfiguredError as NotConfiguredError
    from metis.registry.registry import Registry as Registry
    from metis.registry.registry import Route as Route
    from metis.routing import Router as Router
    from metis.stacks.loader import load_stack as load_stack
    from metis.telemetry import ListSink as ListSink
    from metis.telemetry import LoggingSink as LoggingSink
    from metis.telemetry import OpenTelemetrySink as OpenTelemetrySink
    from metis.telemetry import TelemetrySink as TelemetrySink
    from metis.tools import Tool as Tool
    from metis.tools import arun_tools as arun_tools
    from metis.tools import run_tools as run_tools
    from metis.tools import tool as tool
