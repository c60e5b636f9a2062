"""The writer of a translated stream in the caller's API (Messages, Chat, Responses), with the
id and headers its answer begins with, and the bytes that end it when the gateway cuts it."""

from __future__ import annotations

from metis.gateway import anthropic_write, chat_write, responses_api
from metis.gateway.errors import Ending
from metis.gateway.prepared import Prepared
from metis.gateway.provenance import maker
from metis.gateway.reported import dropped_headers
from metis.gateway.sse import BlockWriter, new_id
from metis.model.content import ProviderRaw


def answer_parts(api: str, prepared: Prepared) -> tuple[BlockWriter, str, dict[str, str]]:
    """A stream's writer, its answer's id and its headers (metis.gateway.ahead)."""
    message_id = new_id("msg_") if api == "anthropic" else None
    writer, response_id = stream_writer(api, prepared, message_id)
    headers = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}
    headers.update(dropped_headers(prepared.reported))
    return writer, response_id, headers


def stream_writer(
    api: str, prepared: Prepared, message_id: str | None = None
) -> tuple[BlockWriter, str]:
    """``message_id``: a Messages stream's, when made ahead (else made as it starts)."""
    model, made = prepared.inbound.model, made_by(prepared)
    if api == "anthropic":
        return anthropic_write.MessageStream(model, made, message_id), ""
    if api == "chat":
        options = prepared.inbound.options
        include, legacy = (
            bool(options.get("include_usage")),
            bool(options.get("legacy_functions")),
        )
        return chat_write.ChunkStream(model, include, legacy), ""
    response_id = new_id("resp_")
    writer = responses_api.ResponseStream(prepared.inbound, model, response_id, made)
    return writer, response_id


def ending(api: str, prepared: Prepared, writer: BlockWriter) -> Ending:
    """The bytes that end a translated stream the gateway cuts with an error."""
    return Ending(api, prepared.request.request_id, writer)


def made_by(prepared: Prepared) -> ProviderRaw | None:
    """Who the thinking of a stream is made by, as the adapter records it (a route's model is
    known only once it answers: None)."""
    asked = prepared.request.model
    provider = getattr(prepared.target.chat_model, "name", None)
    if asked.startswith("route:") or not isinstance(provider, str):
        return None
    return maker(provider, asked)
