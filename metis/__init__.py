"""metis: one canonical format for every LLM provider, as a pipeline of small stages.

Start with ``metis.complete("anthropic:claude-sonnet-4-5", "Hi").text`` (``stream``,
``count_tokens``, ``embed``; ``acomplete``, ``astream``, ... in async code), a
``metis.Session(model, tools=[...])`` for a conversation and its tool loop, and
``@metis.tool`` for a tool. The key comes from the provider's variable (``ANTHROPIC_API_KEY``,
...); a failure is a ``metis.AdapterError`` with an ``error_class``. Every public name, with
the page that describes it: docs/names.md.

Names are imported on first use, so ``import metis`` costs almost nothing. The names for
writing stages and stacks (``Stage``, ``Call``, ``Pipeline``, ...) are in
:mod:`metis.pipeline`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metis.core.lazy_exports import lazy_exports, package_getattr
from metis.core.moved_names import MOVED, RENAMED
from metis.core.version import VERSION as __version__

_EXPORTS: dict[str, str] = {
    **dict.fromkeys(["Adapter", "ChatModel", "build_adapter"], "metis.adapter"),
    **dict.fromkeys(["TokenCount"], "metis.adapter.count_tokens"),
    **dict.fromkeys(["Embedder", "build_embedder"], "metis.adapter.embedder"),
    **dict.fromkeys(["Batches"], "metis.adapter.batches"),
    **dict.fromkeys(["CachedContents"], "metis.adapter.cached_contents"),
    **dict.fromkeys(["BatchItem", "BatchResults", "BatchStatus"], "metis.model.batches"),
    **dict.fromkeys(["EmbedOptions", "aembed", "embed"], "metis.calls.embed"),
    **dict.fromkeys(
        ["EmbeddingResult", "ImageInput", "PartialEmbeddings"], "metis.model.embeddings"
    ),
    **dict.fromkeys(
        [
            "CallOptions",
            "acomplete",
            "acount_tokens",
            "astream",
            "complete",
            "count_tokens",
            "stream",
        ],
        "metis.calls",
    ),
    **dict.fromkeys(["UnknownOptionError"], "metis.core.options"),
    **dict.fromkeys(
        [
            "Cost",
            "PriceTable",
            "cost_of",
        ],
        "metis.cost",
    ),
    **dict.fromkeys(
        [
            "AdapterError",
            "AuthError",
            "BlockingCallError",
            "CancelledError",
            "CapabilityError",
            "ClosedError",
            "ConfigError",
            "ContextOverflowError",
            "ErrorClass",
            "InvalidRequestError",
            "InvariantViolation",
            "NetworkError",
            "NotConfiguredError",
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
    **dict.fromkeys(
        [
            "AdapterCapabilities",
            "AudioBlock",
            "Base64ImageSource",
            "CacheHint",
            "CachePolicy",
            "CachedContent",
            "Base64Source",
            "CanonicalRequest",
            "CanonicalResponse",
            "Citation",
            "CitationDelta",
            "CodeExecution",
            "CodeOutput",
            "ContentBlock",
            "DocumentBlock",
            "DocumentLocation",
            "DroppedContent",
            "FileIdSource",
            "FreeformInput",
            "ImageBlock",
            "Message",
            "MessageComplete",
            "MessageStart",
            "ModelUsage",
            "OpaqueBlock",
            "ProviderRaw",
            "ProviderTool",
            "RedactedThinkingBlock",
            "Role",
            "SearchResult",
            "ServerToolCall",
            "ServerToolCallBlock",
            "ServerToolRequests",
            "ServerToolResult",
            "ServerToolResultBlock",
            "StopKind",
            "StopReason",
            "StreamEvent",
            "TextBlock",
            "TextDelta",
            "TextSource",
            "TextSpan",
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
            "UserLocation",
            "VideoBlock",
            "WebFetch",
            "WebSearch",
        ],
        "metis.model",
    ),
    **dict.fromkeys(
        [
            "MessageDict",
        ],
        "metis.model.dicts",
    ),
    **dict.fromkeys(
        [
            "AdapterConfig",
        ],
        "metis.pipeline.config",
    ),
    **dict.fromkeys(
        [
            "InMemoryToolIdStore",
            "ToolIdStore",
        ],
        "metis.pipeline.stores",
    ),
    **dict.fromkeys(
        [
            "ModelRoute",
            "Registry",
        ],
        "metis.registry",
    ),
    **dict.fromkeys(
        [
            "RouteTarget",
            "Router",
        ],
        "metis.routing",
    ),
    **dict.fromkeys(
        [
            "RunResult",
            "Session",
            "SessionBusyError",
        ],
        "metis.sessions",
    ),
    **dict.fromkeys(
        [
            "AvailabilityChanged",
            "CallCompleted",
            "CallFailed",
            "CallStarted",
            "ListSink",
            "LoggingSink",
            "MultiSink",
            "NullSink",
            "OpenTelemetrySink",
            "RouteDecided",
            "SharedStateChanged",
            "TelemetryEvent",
            "TelemetrySink",
            "ToolIdStoreFailed",
        ],
        "metis.telemetry",
    ),
    **dict.fromkeys(["AnyTool", "Tool", "arun_tools", "run_tools", "tool"], "metis.tools"),
    "ToolLike": "metis.tools",
    "ToolError": "metis.tool_results",
}
"""Every public name of ``metis``, and the module it is imported from on first use."""

__all__ = sorted(_EXPORTS)


_load, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if not TYPE_CHECKING:  # a type checker sees only the names imported below: metis.Sesion is an error
    __getattr__ = package_getattr(__name__, _EXPORTS, _load, MOVED, RENAMED)

if TYPE_CHECKING:
    # The subpackages a program reaches as attributes once it has `import metis` (which
    # __getattr__ imports on first use): metis.histories.from_openai_chat(...).
    from metis import (
        adapter,
        catalog,
        cost,
        errors,
        histories,
        model,
        pipeline,
        registry,
        routing,
        sessions,
        telemetry,
        tools,
    )
    from metis.adapter import Adapter as Adapter
    from metis.adapter import ChatModel as ChatModel
    from metis.adapter import build_adapter as build_adapter
    from metis.adapter.batches import Batches as Batches
    from metis.adapter.cached_contents import CachedContents as CachedContents
    from metis.adapter.count_tokens import TokenCount as TokenCount
    from metis.adapter.embedder import Embedder as Embedder
    from metis.adapter.embedder import build_embedder as build_embedder
    from metis.calls import CallOptions as CallOptions
    from metis.calls import acomplete as acomplete
    from metis.calls import acount_tokens as acount_tokens
    from metis.calls import astream as astream
    from metis.calls import complete as complete
    from metis.calls import count_tokens as count_tokens
    from metis.calls import stream as stream
    from metis.calls.embed import EmbedOptions as EmbedOptions
    from metis.calls.embed import aembed as aembed
    from metis.calls.embed import embed as embed
    from metis.core.options import UnknownOptionError as UnknownOptionError
    from metis.cost import Cost as Cost
    from metis.cost import PriceTable as PriceTable
    from metis.cost import cost_of as cost_of
    from metis.errors import AdapterError as AdapterError
    from metis.errors import AuthError as AuthError
    from metis.errors import BlockingCallError as BlockingCallError
    from metis.errors import CancelledError as CancelledError
    from metis.errors import CapabilityError as CapabilityError
    from metis.errors import ClosedError as ClosedError
    from metis.errors import ConfigError as ConfigError
    from metis.errors import ContextOverflowError as ContextOverflowError
    from metis.errors import ErrorClass as ErrorClass
    from metis.errors import InvalidRequestError as InvalidRequestError
    from metis.errors import InvariantViolation as InvariantViolation
    from metis.errors import NetworkError as NetworkError
    from metis.errors import NotConfiguredError as NotConfiguredError
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
    from metis.model import CachedContent as CachedContent
    from metis.model import CacheHint as CacheHint
    from metis.model import CachePolicy as CachePolicy
    from metis.model import CanonicalRequest as CanonicalRequest
    from metis.model import CanonicalResponse as CanonicalResponse
    from metis.model import Citation as Citation
    from metis.model import CitationDelta as CitationDelta
    from metis.model import CodeExecution as CodeExecution
    from metis.model import CodeOutput as CodeOutput
    from metis.model import ContentBlock as ContentBlock
    from metis.model import DocumentBlock as DocumentBlock
    from metis.model import DocumentLocation as DocumentLocation
    from metis.model import DroppedContent as DroppedContent
    from metis.model import FileIdSource as FileIdSource
    from metis.model import FreeformInput as FreeformInput
    from metis.model import ImageBlock as ImageBlock
    from metis.model import Message as Message
    from metis.model import MessageComplete as MessageComplete
    from metis.model import MessageStart as MessageStart
    from metis.model import ModelUsage as ModelUsage
    from metis.model import OpaqueBlock as OpaqueBlock
    from metis.model import ProviderRaw as ProviderRaw
    from metis.model import ProviderTool as ProviderTool
    from metis.model import RedactedThinkingBlock as RedactedThinkingBlock
    from metis.model import Role as Role
    from metis.model import SearchResult as SearchResult
    from metis.model import ServerToolCall as ServerToolCall
    from metis.model import ServerToolCallBlock as ServerToolCallBlock
    from metis.model import ServerToolRequests as ServerToolRequests
    from metis.model import ServerToolResult as ServerToolResult
    from metis.model import ServerToolResultBlock as ServerToolResultBlock
    from metis.model import StopKind as StopKind
    from metis.model import StopReason as StopReason
    from metis.model import StreamEvent as StreamEvent
    from metis.model import TextBlock as TextBlock
    from metis.model import TextDelta as TextDelta
    from metis.model import TextSource as TextSource
    from metis.model import TextSpan as TextSpan
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
    from metis.model import UserLocation as UserLocation
    from metis.model import VideoBlock as VideoBlock
    from metis.model import WebFetch as WebFetch
    from metis.model import WebSearch as WebSearch
    from metis.model.batches import BatchItem as BatchItem
    from metis.model.batches import BatchResults as BatchResults
    from metis.model.batches import BatchStatus as BatchStatus
    from metis.model.dicts import MessageDict as MessageDict
    from metis.model.embeddings import EmbeddingResult as EmbeddingResult
    from metis.model.embeddings import ImageInput as ImageInput
    from metis.model.embeddings import PartialEmbeddings as PartialEmbeddings
    from metis.pipeline.config import AdapterConfig as AdapterConfig
    from metis.pipeline.stores import InMemoryToolIdStore as InMemoryToolIdStore
    from metis.pipeline.stores import ToolIdStore as ToolIdStore
    from metis.registry import ModelRoute as ModelRoute
    from metis.registry import Registry as Registry
    from metis.routing import Router as Router
    from metis.routing import RouteTarget as RouteTarget
    from metis.sessions import RunResult as RunResult
    from metis.sessions import Session as Session
    from metis.sessions import SessionBusyError as SessionBusyError
    from metis.telemetry import AvailabilityChanged as AvailabilityChanged
    from metis.telemetry import CallCompleted as CallCompleted
    from metis.telemetry import CallFailed as CallFailed
    from metis.telemetry import CallStarted as CallStarted
    from metis.telemetry import ListSink as ListSink
    from metis.telemetry import LoggingSink as LoggingSink
    from metis.telemetry import MultiSink as MultiSink
    from metis.telemetry import NullSink as NullSink
    from metis.telemetry import OpenTelemetrySink as OpenTelemetrySink
    from metis.telemetry import RouteDecided as RouteDecided
    from metis.telemetry import SharedStateChanged as SharedStateChanged
    from metis.telemetry import TelemetryEvent as TelemetryEvent
    from metis.telemetry import TelemetrySink as TelemetrySink
    from metis.telemetry import ToolIdStoreFailed as ToolIdStoreFailed
    from metis.tool_results import ToolError as ToolError
    from metis.tools import AnyTool as AnyTool
    from metis.tools import Tool as Tool
    from metis.tools import ToolLike as ToolLike
    from metis.tools import arun_tools as arun_tools
    from metis.tools import run_tools as run_tools
    from metis.tools import tool as tool
