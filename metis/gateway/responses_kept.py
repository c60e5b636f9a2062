"""The Responses API's stored responses read back (docs/gateway.md): ``GET /v1/responses/{id}``
(the ``response`` object as its client received it, a stream's final state),
``DELETE /v1/responses/{id}``, and ``GET /v1/responses/{id}/input_items`` (the items the
response was made from, the conversation it continued included, a cursor page), from the
gateway's store (metis.gateway.store), for the key that made the response alone.

A stored response is not replayed as a stream: ``stream=true`` is refused (400)."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from metis.errors import AdapterError, InvalidRequestError
from metis.gateway.errors import ResponseNotFoundError
from metis.gateway.item_ids import identity, kind_of, made_id, occurrence
from metis.gateway.json_text import JSONAnswer
from metis.gateway.service import Gateway, error_reply, request_id
from metis.gateway.store import Owner, Stored, owner_of
from metis.wire.openai_responses.encode import input_items

log = logging.getLogger("metis.gateway")
MAX_LIMIT = 100
API = "responses"


Endpoint = Callable[[Request], Awaitable[Response]]


def stored_responses(gateway: Gateway) -> list[tuple[str, Endpoint, str]]:
    """The paths, endpoints and methods this module serves, over ``gateway``'s store."""

    async def kept(request: Request) -> Response:
        return await retrieve(gateway, request)

    async def forget(request: Request) -> Response:
        return await delete(gateway, request)

    async def kept_input(request: Request) -> Response:
        return await listed_input(gateway, request)

    return [
        ("/v1/responses/{response_id}", kept, "GET"),
        ("/v1/responses/{response_id}", forget, "DELETE"),
        ("/v1/responses/{response_id}/input_items", kept_input, "GET"),
    ]


async def retrieve(gateway: Gateway, request: Request) -> Response:
    async def answer(owner: Owner, stored: Stored, query: Mapping[str, str]) -> Any:
        _only(query, "stream")
        if query.get("stream", "false").lower() not in ("false", "0"):
            raise InvalidRequestError(
                "stream: this gateway does not replay a stored response as a stream; "
                "retrieve it without stream"
            )
        return stored.response

    return await _served(gateway, request, answer, "GET /v1/responses/{id}")


async def delete(gateway: Gateway, request: Request) -> Response:
    async def answer(owner: Owner, stored: Stored, query: Mapping[str, str]) -> Any:
        _only(query)
        response_id = request.path_params["response_id"]
        if not await gateway.stored.forget(owner, response_id):
            raise _not_found(response_id)  # deleted meanwhile
        return {"id": response_id, "object": "response", "deleted": True}

    return await _served(gateway, request, answer, "DELETE /v1/responses/{id}")


async def listed_input(gateway: Gateway, request: Request) -> Response:
    async def answer(owner: Owner, stored: Stored, query: Mapping[str, str]) -> Any:
        _only(query, "limit", "order", "after")
        limit = _limit(query.get("limit", "20"))
        order = query.get("order", "desc")
        if order not in ("asc", "desc"):
            raise InvalidRequestError(f"order: expected 'asc' or 'desc', got {order!r}"[:200])
        items = kept_input(stored, request.path_params["response_id"])
        return page(items if order == "asc" else items[::-1], query.get("after"), limit)

    return await _served(gateway, request, answer, "GET /v1/responses/{id}/input_items")


async def _served(
    gateway: Gateway,
    request: Request,
    answer: Callable[[Owner, Stored, Mapping[str, str]], Awaitable[Any]],
    endpoint: str,
) -> Response:
    """``answer`` of the stored response the path names, for the key asking; an unknown id
    and another key's alike a 404; any failure in the Responses API's error shape; counted
    in the metrics under ``endpoint`` (with no model)."""
    rid, started, metrics = request_id(), time.monotonic(), gateway.metrics
    try:
        key = gateway.authenticate(request.headers)
        owner, response_id = owner_of(key), request.path_params["response_id"]
        async with gateway.keys.holding(key):  # a request of the key's, costing nothing
            stored = await gateway.stored.get(owner, response_id)
            if stored is None or stored.response is None:
                raise _not_found(response_id)
            body = await answer(owner, stored, request.query_params)
        metrics.request(API, "", 200, time.monotonic() - started, endpoint)
        return JSONAnswer(body, headers={"x-request-id": rid})
    except AdapterError as exc:
        metrics.error(API, exc, endpoint)
        failed = error_reply(API, exc, rid)
    except Exception:
        metrics.error(API, "other", endpoint)
        log.exception("gateway request failed", extra={"event": "metis.gateway.error"})
        failed = error_reply(API, AdapterError("internal gateway error"), rid)
    metrics.request(API, "", failed.status, time.monotonic() - started, endpoint)
    return JSONAnswer(failed.body, status_code=failed.status, headers=failed.headers)


def _not_found(response_id: str) -> ResponseNotFoundError:
    return ResponseNotFoundError(f"Response with id '{response_id}' not found."[:300])


def _only(query: Mapping[str, str], *known: str) -> None:
    """Query parameters other than ``known`` refused, by name."""
    unknown = sorted(set(query) - set(known))
    if unknown:
        allowed = ", ".join(known) or "none"
        raise InvalidRequestError(
            f"unsupported query parameter {unknown[0]!r} (this gateway serves: {allowed})"[:300]
        )


def _limit(given: str) -> int:
    try:
        limit = int(given)
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequestError(f"limit: expected an integer from 1 to {MAX_LIMIT}"[:200])
    return limit


def page(items: list[dict[str, Any]], after: str | None, limit: int) -> dict[str, Any]:
    """One cursor page of ``items`` (in the order asked): ``limit`` of them after the one
    whose id is ``after``."""
    start = 0
    if after is not None:
        ids = [item["id"] for item in items]
        if after not in ids:
            raise InvalidRequestError(f"after: no input item {after!r} in this response"[:200])
        start = ids.index(after) + 1
    data = items[start : start + limit]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": start + limit < len(items),
    }


def kept_input(stored: Stored, response_id: str) -> list[dict[str, Any]]:
    """The input items a stored response was made from, oldest first: a passed-through one's
    as kept (its output taken off), a translated one's conversation written as items."""
    if stored.items is not None:
        output = (stored.response or {}).get("output") or []
        raw: list[Any] = list(stored.items[: len(stored.items) - len(output)])
    else:
        raw = _named(input_items(list(stored.messages[:-1]), "gateway", _unlisted), stored.ids)
    return [_item(item, response_id, i) for i, item in enumerate(raw) if isinstance(item, dict)]


def _named(items: list[dict[str, Any]], ids: dict[str, str] | None) -> list[dict[str, Any]]:
    """A translated conversation's items under the ids its client knows them by (a second
    item that is the same as one before it under the id of its own occurrence)."""
    if not ids:
        return items
    seen: Counter[str] = Counter()
    out = []
    for item in items:
        key = identity(item)
        if key is not None:
            seen[key] += 1
            found = ids.get(occurrence(key, seen[key]))
            item = {**item, "id": found} if found is not None else item
        out.append(item)
    return out


def _unlisted(block_type: str, reason: str, message_id: str) -> None:
    """What a translated conversation has no input item for (another model's thinking) is
    not listed."""


def _item(item: dict[str, Any], response_id: str, index: int) -> dict[str, Any]:
    """An input item as the API lists it: a message's text as content parts, and an id (one
    made from the response's and the item's place, the same at each asking, when the caller
    gave none)."""
    out = dict(item)
    kind = out["type"] = kind_of(out)
    if kind == "message":
        out["content"] = _parts(out.get("content"), out.get("role") == "assistant")
    if kind in ("message", "function_call", "function_call_output"):
        out.setdefault("status", "completed")
    if not isinstance(out.get("id"), str):
        out["id"] = made_id(kind, response_id, str(index))
    return out


def _parts(content: Any, assistant: bool) -> Any:
    """A message's content as the API lists it: text as a part, a reply's text with its
    annotations."""
    if isinstance(content, str):
        content = [{"type": "output_text" if assistant else "input_text", "text": content}]
    if not isinstance(content, list):
        return content
    return [
        {**part, "annotations": part.get("annotations") or []}
        if isinstance(part, dict) and part.get("type") == "output_text"
        else part
        for part in content
    ]
