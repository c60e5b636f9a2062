"""What an adapter (and the model behind it) can honestly serve (docs/catalog.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from metis.model.knobs import ReasoningProfile, SamplingRanges


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
    supports_stop_sequences: bool = True
    supports_streaming: bool = True
    supports_streaming_tool_calls: bool = False
    supports_parallel_tool_calls: bool = False
    supports_prompt_caching: bool = False
    max_context_tokens: int = Field(default=8192, ge=1)
    max_output_tokens: int = Field(default=4096, ge=1)
    accepted_image_media_types: list[str] = Field(default_factory=list)
    sampling: SamplingRanges | None = None
    """The sampling settings the API takes and the range of each (``temperature: [0, 1]``);
    None: not declared, every setting is sent as given (docs/contract.md §9)."""
    reasoning: ReasoningProfile | None = None
    """How the model is asked to reason, from the catalog; None: unknown or it does not."""
