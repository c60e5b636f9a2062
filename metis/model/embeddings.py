"""The canonical embedding call: what is embedded, what comes back, what a failure keeps.

An embedding call is not a conversation (docs/embeddings.md): a list of inputs (texts, and
images for the models that take them) goes in; one vector per input comes back, in input
order, with the usage and the model that served. A failure of some of the provider requests
a large call was split into keeps every vector that arrived (:class:`PartialEmbeddings`, on
the error's ``partial_embeddings``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, cast

from metis.model.response import TokenUsage

InputType = Literal["query", "document", "classification", "clustering", "similarity", "code_query"]
"""What an input is for, where a provider embeds it differently: ``query`` and ``document``
(retrieval) everywhere they are distinguished; the others only where the provider has them."""


@dataclass(frozen=True, slots=True)
class ImageInput:
    """An image to embed, base64 ``data`` of ``media_type`` (``image/png``, ``image/jpeg``)."""

    data: str
    media_type: str = "image/png"

    def __post_init__(self) -> None:
        data, media_type = cast(object, self.data), cast(object, self.media_type)  # as given
        if not isinstance(data, str):  # bytes went on to fail as a body JSON cannot hold
            said = f"ImageInput takes the image as base64 text, not {type(data).__name__}"
            fix = ": base64.b64encode(data).decode() is it" if isinstance(data, bytes) else ""
            raise TypeError(said + fix)
        if not isinstance(media_type, str) or not media_type.startswith("image/"):
            raise TypeError(f"ImageInput's media_type is an image type, not {media_type!r}")

    @property
    def data_url(self) -> str:
        """The image as a ``data:`` URL."""
        return f"data:{self.media_type};base64,{self.data}"


EmbedInput = str | ImageInput
"""One input: a text, or an image for a model that embeds images."""


@dataclass(frozen=True, slots=True)
class EmbeddingResult:
    """The vectors of one embedding call, in input order, with what it used and who served.

    ``model`` is ``provider:model`` as it served (the provider's own name where it reports
    one); ``usage.input_tokens`` counts every input (``usage.estimated`` when the provider
    reports no count); ``requests`` is how many provider requests the inputs were split into.
    """

    vectors: list[list[float]]
    model: str
    usage: TokenUsage
    requests: int = 1

    @property
    def dimensions(self) -> int:
        """The length of each vector (0 when there is none)."""
        return len(self.vectors[0]) if self.vectors else 0

    def __len__(self) -> int:
        return len(self.vectors)


@dataclass(frozen=True, slots=True)
class FailedItems:
    """The inputs (by their index in the call) one failed provider request carried."""

    indices: range
    error: BaseException


@dataclass(frozen=True, slots=True)
class PartialEmbeddings:
    """What an embedding call that failed in part still has: ``vectors[i]`` for every input
    whose request succeeded, None for the others; ``failures`` says which items each failed
    request carried and why."""

    vectors: list[list[float] | None]
    model: str
    usage: TokenUsage
    failures: tuple[FailedItems, ...] = field(default=())

    @property
    def failed(self) -> list[int]:
        """The indices of the inputs with no vector, in order."""
        return [i for failure in self.failures for i in failure.indices]

    @property
    def succeeded(self) -> int:
        """How many inputs have their vector."""
        return sum(vector is not None for vector in self.vectors)
