"""A structured reply validated against the type asked for, saying first why a reply that
did not end as asked (cut short, refused, filtered, a tool called) does not validate."""

from __future__ import annotations

from typing import TypeVar

from pydantic import TypeAdapter, ValidationError

from metis.errors import OutputValidationError
from metis.model.response import CanonicalResponse
from metis.model.stop import StopKind

T = TypeVar("T")


_UNFINISHED = {
    StopKind.MAX_TOKENS: "the reply was cut at its output limit (max_tokens) before it ended; ",
    StopKind.REFUSAL: "the model refused; ",
    StopKind.CONTENT_FILTER: "the provider's content filter stopped the reply; ",
    StopKind.TOOL_USE: "the model called a tool instead of answering; ",
}
"""What a reply that did not end as asked says before why it does not validate."""


def validated(output: TypeAdapter[T], response: CanonicalResponse) -> T:
    """The reply's structured output as ``output``'s type, or an OutputValidationError
    carrying the reply."""
    try:
        return output.validate_json(response.text)
    except ValidationError as exc:
        written = repr(output).removeprefix("TypeAdapter(").removesuffix(")")  # City, as given
        error = OutputValidationError(
            f"{response.model}: {_unfinished(response)}the reply "
            f"does not validate as {written}: "
            + "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'reply'}: {e['msg']}" for e in exc.errors()
            ),
            raw_text=response.text,
            provider=response.provider,
            request_id=response.request_id,
        )
        error.partial_response = response
        raise error from None


def _unfinished(response: CanonicalResponse) -> str:
    """Why the reply did not end as asked, a refusal with its words (they are not the
    reply's text, docs/contract.md §3)."""
    stop = response.stop_reason
    if stop.kind is StopKind.REFUSAL and stop.explanation:
        return f"the model refused ({stop.explanation[:200]!r}); "
    return _UNFINISHED.get(stop.kind, "")
