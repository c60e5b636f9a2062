"""What an adapter (and the model behind it) can honestly serve (docs/catalog.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from metis.core.empty import empty_list
from metis.model.knobs import ReasoningProfile, SamplingRanges, SettingRules


class AdapterCapabilities(BaseModel):
    """What a stack (and the model behind it) can serve: tools, images, thinking, structured
    output, streaming, limits. The model catalog narrows a stack's declaration per model
    (docs/catalog.md); ``capability_check`` refuses what is not served before sending."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    supports_images: bool = False
    supports_thinking: bool = False
    supports_tools: bool = False
    tools_emulated: bool = False
    """Tools work through a prompt-and-parse shim, not the provider's own tool calling."""
    supports_system_prompt: bool = True
    supports_structured_output: bool = False
    structured_output_per_model: bool = False
    """Structured output and strict tools only for the models the catalog says have structured
    output, none for a model it lacks (Bedrock Converse: the API carries both for every model
    and refuses them for the models without)."""
    supports_stop_sequences: bool = True
    max_stop_sequences: int | None = Field(default=None, ge=1)
    """The most stop sequences the API takes in one request (OpenAI 4, Gemini 5); more is an
    InvalidRequestError before sending. None: no limit known."""
    supports_streaming: bool = True
    supports_streaming_tool_calls: bool = False
    supports_parallel_tool_calls: bool = False
    supports_custom_tools: bool = False
    """Freeform tools go as the provider's own custom tools (OpenAI's), grammars enforced;
    elsewhere a freeform tool is a function of one string, and one with a grammar is refused."""
    supports_strict_tools: bool = False
    """A tool marked ``strict`` goes with the provider's own strict flag (its input held to the
    schema); elsewhere the flag is left out with the dropped-content WARN."""
    supports_prompt_caching: bool = False
    max_context_tokens: int = Field(default=8192, ge=1)
    max_output_tokens: int = Field(default=4096, ge=1)
    accepted_image_media_types: list[str] = Field(default_factory=empty_list)
    server_tools: list[str] = Field(default_factory=empty_list)
    """The tools the provider runs itself that the stack maps (``web_search``, ``web_fetch``,
    ``code_execution``: docs/contract.md §11); any other is a CapabilityError."""
    accepted_document_media_types: list[str] = Field(default_factory=empty_list)
    """The documents the stack's wire carries, by media type (``application/pdf``); empty:
    none. The catalog narrows it per model: PDFs only to a model that reads PDFs or images."""
    cites_documents: bool = False
    """A document may ask to be cited (``DocumentBlock(citations=True)``) and the reply's text
    cites it (Anthropic, Bedrock); elsewhere the ask is reported with the dropped-content WARN."""
    accepted_audio_media_types: list[str] = Field(default_factory=empty_list)
    """Audio input by media type (``audio/wav``); empty: none, and none to a model whose
    catalog entry lists no audio input."""
    accepted_video_media_types: list[str] = Field(default_factory=empty_list)
    """Video input by media type (``video/mp4``); empty: none, and none to a model whose
    catalog entry lists no video input."""
    sampling: SamplingRanges | None = None
    """The sampling settings the API takes and the range of each (``temperature: [0, 1]``);
    None: not declared, every setting is sent as given (docs/contract.md §13)."""
    reasoning: ReasoningProfile | None = None
    """How the model is asked to reason, from the catalog; None: unknown or it does not."""
    setting_rules: SettingRules | None = None
    """What the model refuses beyond the ranges (settings taken one at a time, stop
    sequences), from the catalog; None: nothing known."""
