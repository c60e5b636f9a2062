"""The canonical model: what applications read and write, whatever the provider."""

from metis.model.cache import CacheHint, CachePolicy
from metis.model.capabilities import AdapterCapabilities
from metis.model.content import (
    Base64ImageSource,
    ContentBlock,
    ImageBlock,
    Message,
    ProviderRaw,
    RedactedThinkingBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    URLImageSource,
)
from metis.model.events import (
    MessageComplete,
    MessageStart,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.request import (
    CanonicalRequest,
    ThinkingConfig,
    ToolAnnotations,
    ToolChoice,
    ToolDefinition,
)
from metis.model.response import (
    CanonicalResponse,
    DroppedContent,
    StopKind,
    StopReason,
    TokenUsage,
)

__all__ = [
    "AdapterCapabilities",
    "Base64ImageSource",
    "CacheHint",
    "CachePolicy",
    "CanonicalRequest",
    "CanonicalResponse",
    "ContentBlock",
    "DroppedContent",
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
]
