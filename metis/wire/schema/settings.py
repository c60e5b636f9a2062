"""The wire schema of the schema-driven codec, as a stack YAML writes it (docs/stacks.md).

``SchemaSettings`` is validated once, when the stack is built (a built-in stack's own
settings, package data held valid by tests/stacks/test_deferred.py, when its codec is built
with the first call); a misspelt key, a placeholder the template cannot have or a path that is
not a dot path fails there, naming the key. The
compiled forms (paths as tuples, templates as trees) live on :class:`Compiled`, which is what
the encoder and parsers read.
"""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator

from metis.errors import ErrorClass
from metis.model.stop import StopKind


class _Model(BaseModel):
    """Defaults are plain values (pydantic copies a mutable one for each instance): a
    ``default_factory`` costs its class's build an ``inspect.signature`` (benchmarks/README.md,
    import13), and these models are built with a Gemini adapter's first call."""

    model_config = ConfigDict(extra="forbid", frozen=True)


Paths = str | list[str]


# Requests ------------------------------------------------------------------------------------


class SystemPrompt(_Model):
    mode: Literal["top_level", "role", "first_message"] = "role"
    key: str = "system"
    """``top_level``: the dot path in the body where the system prompt goes."""
    wrap: Literal["string", "parts", "blocks_array", "parts_array"] = "string"
    """``string``: the text itself; ``parts``: ``{parts: [text part]}``; ``*_array``: a list
    holding one text part (the ``text_template``)."""


class ToolResult(_Model):
    role: str = "user"
    wrap_mode: Literal["parts", "direct"] = "parts"
    """``parts``: results are parts of a ``role`` message; ``direct``: each result is its own
    message, the rendered template merged into it next to the role."""
    block_template: Any = None
    error_template: Any = None
    """For a result with ``is_error``; without one, the block template gets the text with
    ``error_prefix`` in front."""
    error_prefix: str = "Error: "
    media_path: str | None = None
    """A dot path in the rendered result where its inline images and files go, as parts
    (Gemini 3's ``functionResponse.parts``); without it, or for a model ``media_models`` does
    not match, they follow the result as parts of the same turn, a note in the result naming
    each."""
    media_models: str | None = None
    """A regular expression of the wire model names that take media at ``media_path``."""


class MessageSchema(_Model):
    messages_key: str = "messages"
    role_key: str = "role"
    role_map: dict[str, str] = {"user": "user", "assistant": "assistant", "system": "system"}
    content_key: str = "content"
    content_wrap: Literal["string", "blocks_array", "parts_array"] = "blocks_array"
    """``string``: text-only content is one string (parts otherwise); the others: a list."""
    merge_same_role: bool = False
    """Consecutive messages with the same wire role become one (their parts concatenated)."""
    system_prompt: SystemPrompt = SystemPrompt()
    text_template: Any = {"type": "text", "text": "{text}"}
    image_template: Any = None
    image_url_template: Any = None
    file_template: Any = None
    """A document, audio or video given inline (``{media_type} {data}``); a document's title
    and context go in a text part before it."""
    file_uri_template: Any = None
    """A file by URL or by the provider's file id (``{media_type} {url}``)."""
    thinking_template: Any = None
    redacted_thinking_template: Any = None
    tool_call_block_template: Any = None
    tool_calls_key: str | None = None
    """Set: an assistant's tool calls go in this separate list (``separate`` mode)."""
    tool_result: ToolResult = ToolResult()
    echo: list[str] = []
    """Part fields kept in a block's ``provider_raw`` on parse and written back onto the same
    part, only when the request goes to the provider and model that produced them."""
    foreign_tool_call_fields: dict[str, Any] = {}
    """Fields for a tool-call part this provider and model did not produce."""


class ToolChoiceTemplates(_Model):
    auto: Any = None
    any: Any = None
    none: Any = None
    tool: Any = None


class RequestSchema(_Model):
    body_template: dict[str, Any] = {}
    tool_template: Any = {
        "name": "{name}",
        "description": "{description}",
        "input_schema": "{input_schema}",
    }
    tool_choice: ToolChoiceTemplates = ToolChoiceTemplates()


# Responses -----------------------------------------------------------------------------------


class Detect(_Model):
    """Block detection (docs/stacks.md): ``key`` present and/or ``field`` equal to ``value``."""

    key: str | None = None
    field: str | None = None
    value: Any = None


class FinishSource(_Model):
    path: str
    map: dict[str, StopKind] | None = None
    """Raw value -> stop kind; ``None``: the schema's ``finish_reasons``."""
    default: StopKind = StopKind.PROVIDER_SPECIFIC


BlockKind = Literal["text", "thinking", "tool_call", "image"]


class ResponseSchema(_Model):
    content_mode: Literal["blocks", "separate"] = "blocks"
    content_path: str = "content"
    block_detect: dict[BlockKind, Detect] = {}
    text_value: str = "text"
    thinking_value: str = "thinking"
    thinking_signature: str | None = None
    image_media_type: str | None = None
    """Where an ``image`` part gives its media type; a part whose type is not ``image/...``
    (audio a speech model made) is kept whole, opaque."""
    image_data: str | None = None
    """Where an ``image`` part gives its base64 data."""
    text_field: str = "content"
    thinking_field: str | None = None
    tool_calls_field: str = "tool_calls"
    tool_call_name: str = "name"
    tool_call_input: str = "input"
    tool_call_input_format: Literal["object", "json_string"] = "object"
    tool_call_id: str | None = "id"
    tool_call_index: str | None = None
    minted_id_prefix: str = "call_"
    response_id_path: str | None = "id"
    model_path: str | None = "model"
    usage_path: str = "usage"
    input_tokens: Paths = "input_tokens"
    output_tokens: Paths = "output_tokens"
    cached_input_tokens: Paths | None = None
    cache_creation_input_tokens: Paths | None = None
    reasoning_tokens: Paths | None = None
    """Where the reasoning part of the output is counted (it is added to ``output_tokens``'
    paths too where the provider counts it apart, as Gemini's ``thoughtsTokenCount``)."""
    modality_counts: tuple[str, str] | None = None
    """The usage object's keys of the input's and the output's counts by modality, lists of
    ``{modality, tokenCount}`` (Gemini's ``promptTokensDetails``, ``candidatesTokensDetails``):
    their ``AUDIO`` counts are the usage's ``input_audio_tokens``, ``output_audio_tokens``."""
    input_includes_cached: bool = False
    service_tier: list[str] = []
    """The usage object's keys that may name the tier that served the reply (the first one
    there is read: Vertex's ``trafficType``, the Gemini API's ``serviceTier``)."""
    finish_reason_path: str | list[str | FinishSource] = "stop_reason"
    finish_reasons: dict[str, StopKind] = {}
    finish_reason_tool_use: list[str] = []
    finish_reason_no_call: list[str] = []
    dropped_fields: list[str] = []

    @field_validator("block_detect")
    @classmethod
    def _detectable(cls, value: dict[str, Detect]) -> dict[str, Detect]:
        for kind, rule in value.items():
            if rule.key is None and rule.field is None:
                raise ValueError(f"{kind}: give a key, or a field and a value")
        return value


class ErrorSchema(_Model):
    path: str = "error"
    message: str = "message"
    code: Paths = "type"
    """Paths (in the error object) whose values name the error; the first one ``classes``
    knows decides the class (and is the ``provider_code``; else the first present is)."""
    retry_after: str | None = None
    """Path to a delay in the error object: seconds, or a duration such as ``"17s"``."""
    classes: dict[str, ErrorClass] = {}
    request_id_header: str | None = None


class SchemaSettings(_Model):
    name: str = "schema"
    message_schema: MessageSchema = MessageSchema()
    request_schema: RequestSchema = RequestSchema()
    response_schema: ResponseSchema = ResponseSchema()
    stream_schema: dict[str, Any] = {}
    """Overrides of ``response_schema`` keys for streamed chunks (same keys)."""
    error_schema: ErrorSchema = ErrorSchema()
