"""The canonical model: what applications read and write, whatever the provider.

Each name is imported from its module on first use (PEP 562), so importing one module of the
package (``metis.model.knobs``) does not build every content block's class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metis.core.lazy_exports import lazy_exports

_EXPORTS: dict[str, str] = {
    "AdapterCapabilities": "metis.model.capabilities",
    "AudioBlock": "metis.model.media",
    "Base64Source": "metis.model.media",
    "DocumentBlock": "metis.model.media",
    "FileIdSource": "metis.model.media",
    "TextSource": "metis.model.media",
    "URLSource": "metis.model.media",
    "VideoBlock": "metis.model.media",
    "Base64ImageSource": "metis.model.content",
    "ContentBlock": "metis.model.content",
    "ImageBlock": "metis.model.content",
    "Message": "metis.model.content",
    "OpaqueBlock": "metis.model.content",
    "ProviderRaw": "metis.model.content",
    "RedactedThinkingBlock": "metis.model.content",
    "Role": "metis.model.content",
    "TextBlock": "metis.model.content",
    "ThinkingBlock": "metis.model.content",
    "ToolResultBlock": "metis.model.content",
    "ToolUseBlock": "metis.model.content",
    "URLImageSource": "metis.model.content",
    "CacheHint": "metis.model.cache",
    "CachePolicy": "metis.model.cache",
    "CachedContent": "metis.model.cache",
    "CanonicalRequest": "metis.model.request",
    "Compaction": "metis.model.request",
    "FreeformInput": "metis.model.request",
    "ThinkingConfig": "metis.model.request",
    "ToolAnnotations": "metis.model.request",
    "ToolChoice": "metis.model.request",
    "ToolDefinition": "metis.model.request",
    "CanonicalResponse": "metis.model.response",
    "DroppedContent": "metis.model.response",
    "ModelUsage": "metis.model.response",
    "ServerToolRequests": "metis.model.response",
    "StopKind": "metis.model.stop",
    "ServiceTier": "metis.model.tier",
    "TierKind": "metis.model.tier",
    "StopReason": "metis.model.response",
    "TokenUsage": "metis.model.response",
    "Citation": "metis.model.citation",
    "DocumentLocation": "metis.model.citation",
    "TextSpan": "metis.model.citation",
    "CitationDelta": "metis.model.events",
    "MessageComplete": "metis.model.events",
    "MessageStart": "metis.model.events",
    "ServerToolCall": "metis.model.events",
    "ServerToolResult": "metis.model.events",
    "StreamEvent": "metis.model.events",
    "TextDelta": "metis.model.events",
    "ThinkingDelta": "metis.model.events",
    "ToolUseEnd": "metis.model.events",
    "ToolUseInputDelta": "metis.model.events",
    "ToolUseStart": "metis.model.events",
    "CodeExecution": "metis.model.server_tools",
    "CodeOutput": "metis.model.server_tools",
    "ProviderTool": "metis.model.server_tools",
    "SearchResult": "metis.model.server_tools",
    "ServerTool": "metis.model.server_tools",
    "ServerToolCallBlock": "metis.model.server_tools",
    "ServerToolResultBlock": "metis.model.server_tools",
    "UserLocation": "metis.model.server_tools",
    "WebFetch": "metis.model.server_tools",
    "WebSearch": "metis.model.server_tools",
}
"""Every public name of ``metis.model``, and the module it is imported from on first use."""

__all__ = sorted(_EXPORTS)


_load, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
if not TYPE_CHECKING:  # to a type checker only the names imported below exist
    __getattr__ = _load


if TYPE_CHECKING:
    from metis.model.cache import CachedContent as CachedContent
    from metis.model.cache import CacheHint as CacheHint
    from metis.model.cache import CachePolicy as CachePolicy
    from metis.model.capabilities import AdapterCapabilities as AdapterCapabilities
    from metis.model.citation import Citation as Citation
    from metis.model.citation import DocumentLocation as DocumentLocation
    from metis.model.citation import TextSpan as TextSpan
    from metis.model.content import Base64ImageSource as Base64ImageSource
    from metis.model.content import ContentBlock as ContentBlock
    from metis.model.content import ImageBlock as ImageBlock
    from metis.model.content import Message as Message
    from metis.model.content import OpaqueBlock as OpaqueBlock
    from metis.model.content import ProviderRaw as ProviderRaw
    from metis.model.content import RedactedThinkingBlock as RedactedThinkingBlock
    from metis.model.content import Role as Role
    from metis.model.content import TextBlock as TextBlock
    from metis.model.content import ThinkingBlock as ThinkingBlock
    from metis.model.content import ToolResultBlock as ToolResultBlock
    from metis.model.content import ToolUseBlock as ToolUseBlock
    from metis.model.content import URLImageSource as URLImageSource
    from metis.model.events import CitationDelta as CitationDelta
    from metis.model.events import MessageComplete as MessageComplete
    from metis.model.events import MessageStart as MessageStart
    from metis.model.events import ServerToolCall as ServerToolCall
    from metis.model.events import ServerToolResult as ServerToolResult
    from metis.model.events import StreamEvent as StreamEvent
    from metis.model.events import TextDelta as TextDelta
    from metis.model.events import ThinkingDelta as ThinkingDelta
    from metis.model.events import ToolUseEnd as ToolUseEnd
    from metis.model.events import ToolUseInputDelta as ToolUseInputDelta
    from metis.model.events import ToolUseStart as ToolUseStart
    from metis.model.media import AudioBlock as AudioBlock
    from metis.model.media import Base64Source as Base64Source
    from metis.model.media import DocumentBlock as DocumentBlock
    from metis.model.media import FileIdSource as FileIdSource
    from metis.model.media import TextSource as TextSource
    from metis.model.media import URLSource as URLSource
    from metis.model.media import VideoBlock as VideoBlock
    from metis.model.request import CanonicalRequest as CanonicalRequest
    from metis.model.request import Compaction as Compaction
    from metis.model.request import FreeformInput as FreeformInput
    from metis.model.request import ThinkingConfig as ThinkingConfig
    from metis.model.request import ToolAnnotations as ToolAnnotations
    from metis.model.request import ToolChoice as ToolChoice
    from metis.model.request import ToolDefinition as ToolDefinition
    from metis.model.response import CanonicalResponse as CanonicalResponse
    from metis.model.response import DroppedContent as DroppedContent
    from metis.model.response import ModelUsage as ModelUsage
    from metis.model.response import ServerToolRequests as ServerToolRequests
    from metis.model.response import StopReason as StopReason
    from metis.model.response import TokenUsage as TokenUsage
    from metis.model.server_tools import CodeExecution as CodeExecution
    from metis.model.server_tools import CodeOutput as CodeOutput
    from metis.model.server_tools import ProviderTool as ProviderTool
    from metis.model.server_tools import SearchResult as SearchResult
    from metis.model.server_tools import ServerTool as ServerTool
    from metis.model.server_tools import ServerToolCallBlock as ServerToolCallBlock
    from metis.model.server_tools import ServerToolResultBlock as ServerToolResultBlock
    from metis.model.server_tools import UserLocation as UserLocation
    from metis.model.server_tools import WebFetch as WebFetch
    from metis.model.server_tools import WebSearch as WebSearch
    from metis.model.stop import StopKind as StopKind
    from metis.model.tier import ServiceTier as ServiceTier
    from metis.model.tier import TierKind as TierKind
