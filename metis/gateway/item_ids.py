"""The ids a client saw on the Responses items of a conversation, kept so that
``GET /v1/responses/{id}/input_items`` lists each item under the id it was given (docs/gateway.md
"Stored responses read back").

A translated conversation is kept as canonical messages, which hold no item ids, so beside them
each stored response keeps a map from an item's identity (a call's or its output's ``call_id``;
a message's role and text, and which time they are said: :func:`occurrence`) to the id the
client knows it by: the ids the client sent on its
input items, an id made once for each input item it sent without one, each reply's output
items' ids, and all of those of the response it continued. A passed-through conversation is
kept as the items themselves: an input item sent without an id is given one as it is kept."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

PREFIXES = {"message": "msg_", "function_call": "fc_", "function_call_output": "fco_"}
"""The id prefix of an input item the caller sent without an id, by its type."""
GivenIds = tuple[dict[str, str], list[str]]
"""The ids known before an answer, and the identities of the items that came without one."""
CALLS = frozenset(
    {"function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output"}
)


def kind_of(item: dict[str, Any]) -> str:
    return str(item.get("type") or ("message" if "role" in item else "item"))


def made_id(kind: str, response_id: str, place: str) -> str:
    """An id for an item of ``kind`` that came without one, the same at each asking."""
    named = f"{response_id}:{place}".encode(errors="surrogatepass")  # a provider's id, as read
    digest = hashlib.sha256(named).hexdigest()[:48]
    return PREFIXES.get(kind, "item_") + digest


def identity(item: Any) -> str | None:
    """What an item is, whoever wrote it (the client, a reply, metis from canonical
    messages): a call's kind and ``call_id``, a message's role and text; None for others."""
    if not isinstance(item, dict):
        return None
    kind = kind_of(item)
    if kind in CALLS:
        call_id = item.get("call_id")
        return f"{kind}:{call_id}" if isinstance(call_id, str) else None
    if kind != "message":
        return None
    content = item.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        parts = (p.get("text") or p.get("refusal") for p in content if isinstance(p, dict))
        text = "\x00".join(p for p in parts if isinstance(p, str))
    else:
        return None
    digest = hashlib.blake2b(text.encode(errors="replace"), digest_size=12).hexdigest()
    return f"message:{item.get('role')}:{digest}"


def occurrence(key: str, n: int) -> str:
    """The identity of the ``n``-th item of a conversation that is ``key`` (from 1): a message
    said twice is two items, each with its own id."""
    return key if n == 1 else f"{key}#{n}"


def _next(taken: set[str], key: str) -> str | None:
    """``key``'s next occurrence after those ``taken`` (which it joins); None for a call
    already known (a call and its output are one item each, however often they are sent)."""
    if key in taken and _kind(key) in CALLS:
        return None
    n = 1
    while occurrence(key, n) in taken:
        n += 1
    taken.add(occurrence(key, n))
    return occurrence(key, n)


def _kind(key: str) -> str:
    return key.partition(":")[0]


def given_ids(previous: dict[str, str] | None, given: Any) -> GivenIds:
    """The ids known before a request's answer: the continued response's and those on the
    request's own input items; and the identities of its items that came without one."""
    ids = dict(previous or {})
    taken, unnamed = set(ids), []
    items = given if isinstance(given, list) else [{"role": "user", "content": given}]
    for item in items:
        found = identity(item)
        key = _next(taken, found) if found is not None else None
        if key is None:
            continue
        given_id = item.get("id")
        if isinstance(given_id, str):
            ids[key] = given_id
        else:
            unnamed.append(key)
    return ids, unnamed


def answered_ids(
    known: dict[str, str], unnamed: Iterable[str], response: dict[str, Any]
) -> dict[str, str]:
    """The ids of a conversation once ``response`` answered it: ``known``, one made for each
    of the items that came without one, and the reply's output items'."""
    ids = dict(known)
    response_id = str(response.get("id"))
    for key in unnamed:
        ids.setdefault(key, made_id(_kind(key), response_id, key))
    taken = set(ids)
    for item in response.get("output") or ():
        found = identity(item)
        place = _next(taken, found) if found is not None else None
        if place is not None and isinstance(item.get("id"), str):
            ids[place] = item["id"]
    return ids


def named_items(items: Iterable[Any], response_id: str) -> tuple[Any, ...]:
    """A passed-through conversation's items, each input item sent without an id given one
    (made from the response's id and the item's place)."""
    return tuple(
        {**item, "id": made_id(kind_of(item), response_id, str(i))}
        if isinstance(item, dict) and not isinstance(item.get("id"), str)
        else item
        for i, item in enumerate(items)
    )
