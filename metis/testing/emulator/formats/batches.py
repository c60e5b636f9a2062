"""The batch APIs, simulated: Anthropic Message Batches, OpenAI's Batch API (files and
batches, over Chat Completions and Responses) and Gemini's batch mode (inline requests).

A batch's items are answered when it is submitted, each as its own request would be (the same
format, rules, model and faults: ``Env.answer``), and kept in memory. It reports itself running
for the first :data:`POLLS_TO_FINISH` status reads, then finished. An item whose request
carries ``[fail]`` fails as the provider's 500; a batch with ``[expire]`` in any request
expires: none of its items is answered. Results come back in reverse order, as the providers
say they may.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from metis.testing.emulator.formats.anthropic import Anthropic
from metis.testing.emulator.formats.base import Call, Format, Route
from metis.testing.emulator.formats.gemini import Gemini
from metis.testing.emulator.rules import Refused, check, table
from metis.testing.emulator.wire import HttpRequest, JsonReply, request_ids

POLLS_TO_FINISH = 2
"""Status reads a batch answers as running before it is finished."""
ANTHROPIC_RULES = table("anthropic_batches")
GEMINI_RULES = table("gemini_batches")


@dataclass(slots=True)
class Batch:
    id: str
    items: list[tuple[str, int, dict[str, Any] | None]] = field(default_factory=list)
    """(custom id, HTTP status, body) per request; the body None when it expired."""
    polls: int = 0
    expired: bool = False
    cancelled: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def finished(self) -> bool:
        return self.cancelled or self.polls > POLLS_TO_FINISH

    def state(self, names: str) -> str:
        """Its state in an API's words, ``names``: not yet read, running, cancelled, expired,
        finished."""
        waiting, running, cancelled, expired, finished = names.split()
        if not self.finished():
            return waiting if self.polls == 0 else running
        return cancelled if self.cancelled else expired if self.expired else finished

    @property
    def succeeded(self) -> int:
        return sum(1 for _, status, body in self.items if status == 200 and body is not None)


def run_items(
    fmt: Format, call: Call, requests: list[tuple[str, str, dict[str, Any]]], batch_id: str
) -> Batch:
    """A batch of (custom id, path, body) answered now, each as its own request would be."""
    expired = any("[expire]" in json.dumps(body) for _, _, body in requests)
    batch = Batch(batch_id, expired=expired)
    for key, path, body in requests:
        if expired:
            batch.items.append((key, 0, None))
            continue
        batch.items.append((key, *answer_one(fmt, call, path, body)))
    batch.items.reverse()  # any order: key by custom id
    return batch


def answer_one(
    fmt: Format, outer: Call, path: str, body: dict[str, Any]
) -> tuple[int, dict[str, Any]]:
    raw = json.dumps(body).encode()
    request = HttpRequest("POST", path, {}, dict(outer.request.headers), raw)
    if "[fail]" in raw.decode():
        reply = fmt.fault("server_error", request, 0)
        return reply.status, reply.body
    found = fmt.route("POST", path)
    if found is None:
        return 404, {"error": {"type": "not_found_error", "message": f"No such endpoint: {path}"}}
    one = Call(found[0], request, found[1], outer.env)
    try:
        reply = outer.env.answer(fmt, one)
    except Refused as refused:
        reply = fmt.refusal(refused, request)
    return reply.status, reply.body


def polled(call: Call, missing: str) -> Batch:
    """The batch a status read (one more poll) or a cancel (it is cancelled) names; a 404
    saying ``missing`` when there is none."""
    with call.env.lock:
        found = call.env.batches.get(call.match["id"])
    if not isinstance(found, Batch):
        raise Refused(missing, status=404)
    if call.endpoint == "cancel":
        found.cancelled = True
    elif call.endpoint == "status":
        found.polls += 1
    return found


def store(call: Call, batch: Batch) -> Batch:
    with call.env.lock:
        call.env.batches[batch.id] = batch
    return batch


def origin(request: HttpRequest) -> str:
    """The scheme and host the request reached: where a URL the emulator gives out points."""
    host = request.header("host") or "localhost"
    local = host.startswith(("127.", "localhost", "[::1]"))
    return ("http://" if local else "https://") + host


class AnthropicBatches(Anthropic):
    name = "anthropic"
    routes: ClassVar[Sequence[Route]] = (
        ("POST", r"/v1/messages/batches", "create"),
        ("GET", r"/v1/messages/batches/(?P<id>[^/]+)", "status"),
        ("GET", r"/v1/messages/batches/(?P<id>[^/]+)/results", "results"),
        ("POST", r"/v1/messages/batches/(?P<id>[^/]+)/cancel", "cancel"),
    )

    def parse(self, call: Call) -> None:
        if call.endpoint != "create":
            return
        check(ANTHROPIC_RULES, call.body)

    def serve(self, call: Call) -> JsonReply | None:
        if call.endpoint == "create":
            batch_id = "msgbatch_" + request_ids(call.request).token(24)
            requests = [
                (i["custom_id"], "/v1/messages", i["params"]) for i in call.body["requests"]
            ]
            batch = store(call, run_items(Anthropic(), call, requests, batch_id))
            return JsonReply(200, self._object(batch, call.request))
        batch = polled(call, "Message batch not found")
        if call.endpoint == "results":
            if not batch.finished():
                raise Refused("Message batch is still processing", status=400)
            lines = [
                json.dumps({"custom_id": key, "result": self._result(batch, status, body)})
                for key, status, body in batch.items
            ]
            raw = "\n".join(lines).encode() + b"\n"
            return JsonReply(200, raw=raw, headers={"content-type": "application/binary"})
        return JsonReply(200, self._object(batch, call.request))

    def _result(self, batch: Batch, status: int, body: dict[str, Any] | None) -> dict[str, Any]:
        if batch.cancelled:
            return {"type": "canceled"}
        if body is None:
            return {"type": "expired"}
        if status == 200:
            return {"type": "succeeded", "message": body}
        return {"type": "errored", "error": body}

    def _object(self, batch: Batch, request: HttpRequest) -> dict[str, Any]:
        done = batch.finished()
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        counts["processing"] = 0 if done else len(batch.items)
        for _, status, body in batch.items if done else ():
            counts[self._result(batch, status, body)["type"]] += 1
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended" if done else "in_progress",  # a cancel ends it at once
            "request_counts": counts,
            "created_at": "2026-11-26T09:00:00Z",
            "expires_at": "2026-11-27T09:00:00Z",
            "ended_at": "2026-11-26T09:05:00Z" if done else None,
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"{origin(request)}/v1/messages/batches/{batch.id}/results"
            if done
            else None,
        }


class GeminiBatches(Gemini):
    name = "gemini"
    routes: ClassVar[Sequence[Route]] = (
        ("POST", r"/(v1beta|v1)/models/(?P<model>[^/:]+):batchGenerateContent", "create"),
        ("GET", r"/(v1beta|v1)/batches/(?P<id>[^/:]+)", "status"),
        ("POST", r"/(v1beta|v1)/batches/(?P<id>[^/:]+):cancel", "cancel"),
    )

    def parse(self, call: Call) -> None:
        if call.endpoint != "create":
            return
        check(GEMINI_RULES, call.body)

    def serve(self, call: Call) -> JsonReply | None:
        if call.endpoint == "create":
            model = call.match["model"]
            path = f"/v1beta/models/{model}:generateContent"
            requests = []
            for i, item in enumerate(call.body["batch"]["input_config"]["requests"]["requests"]):
                key = ((item.get("metadata") or {}).get("key")) if isinstance(item, dict) else None
                requests.append(
                    (str(key if key is not None else i), path, (item or {}).get("request") or {})
                )
            batch = run_items(Gemini(), call, requests, request_ids(call.request).token(16).lower())
            batch.extra["model"] = model
            return JsonReply(200, self._operation(store(call, batch)))
        batch = polled(call, f"Batch batches/{call.match['id']} not found.")
        return JsonReply(200, {} if call.endpoint == "cancel" else self._operation(batch))

    def _operation(self, batch: Batch) -> dict[str, Any]:
        done = batch.finished()
        state = "BATCH_STATE_" + batch.state("PENDING RUNNING CANCELLED EXPIRED SUCCEEDED")
        metadata = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "model": f"models/{batch.extra.get('model')}",
            "name": f"batches/{batch.id}",
            "state": state,
            "batchStats": {"requestCount": str(len(batch.items))},
        }
        operation: dict[str, Any] = {"name": f"batches/{batch.id}", "metadata": metadata}
        if done:
            operation["done"] = True
        if state == "BATCH_STATE_SUCCEEDED":
            inlined = [
                {"response": body, "metadata": {"key": key}}
                if status == 200
                else {"error": (body or {}).get("error", body), "metadata": {"key": key}}
                for key, status, body in batch.items
            ]
            operation["response"] = {
                "@type": "type.googleapis.com/google.ai.generativelanguage.v1main."
                "GenerateContentBatchOutput",
                "inlinedResponses": {"inlinedResponses": inlined},
            }
        return operation
