"""Bad input thrown at the gateway, on each API and on both paths (a model of the caller's own
API, passed through; a Gemini model, translated): bodies that are not a JSON object, too deep,
too large (with and without a Content-Length), compressed, of the wrong type in any field; the
HTTP around them (methods, paths, auth headers); and Anthropic's token count. Every case gets
its API's own error shape and status, never a 500 from the gateway itself. Each group loops
over its cases in one test, each failure naming its case."""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import pytest

from metis.gateway.app import create_app
from metis.gateway.models import Target
from metis.model.capabilities import AdapterCapabilities
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config

pytestmark = [pytest.mark.anyio, pytest.mark.backend_independent]
HEADERS = {"x-api-key": GATEWAY_KEY, "content-type": "application/json"}
SAID = [{"role": "user", "content": "Hi"}]
APIS = {
    # api -> (path, body without its model, the model of its own API, a translated one)
    "anthropic": ("/v1/messages", {"max_tokens": 50, "messages": SAID}, "sonnet"),
    "count_tokens": ("/v1/messages/count_tokens", {"messages": SAID}, "sonnet"),
    "chat": ("/v1/chat/completions", {"messages": SAID}, "gpt"),
    "responses": ("/v1/responses", {"input": "Hi"}, "gpt5"),
}


def each_route() -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """(label, api, path, body) for each API on each path."""
    for api, (path, body, own) in APIS.items():
        for model in (own, "flash"):
            yield f"{api}/{model}", api, path, {"model": model, **body}


def error_of(api: str, reply: httpx.Response) -> str:
    """The error type (Anthropic) or type/code (OpenAI) of an error reply in ``api``'s shape
    (an AssertionError when it is not in it)."""
    body = reply.json()
    if api in ("anthropic", "count_tokens"):
        assert body["type"] == "error" and set(body["error"]) == {"type", "message"}, body
        assert reply.headers.get("request-id"), reply.headers
        return str(body["error"]["type"])
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    return f"{body['error']['type']}/{body['error']['code']}"


def expect(api: str, anthropic: str, openai: str) -> str:
    return anthropic if api in ("anthropic", "count_tokens") else openai


def with_field(body: dict[str, Any], raw: bytes) -> bytes:
    """``body`` with ``raw`` (a member written out) at its end."""
    return json.dumps(body)[:-1].encode() + b", " + raw + b"}"


def client(app: Any) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://gw", timeout=60)


@pytest.fixture
def emulator() -> Emulator:
    return Emulator()


async def chunked(data: bytes) -> AsyncIterator[bytes]:
    """A body sent with no Content-Length (chunked), in pieces."""
    for start in range(0, len(data), 4096):
        yield data[start : start + 4096]


def body_cases(body: dict[str, Any]) -> dict[str, tuple[bytes, dict[str, str], int, str]]:
    """name -> (body, headers, status, the Anthropic error type): every one in the caller's
    error shape (the OpenAI type follows from the status here)."""
    deep = b"[" * 100_000 + b"]" * 100_000
    bomb = gzip.compress(b" " * 2_000_000)  # 2 MB of spaces in about 2 KB
    plain = json.dumps(body).encode()
    accented = json.dumps(body, ensure_ascii=False).replace('"Hi"', '"Café?"')
    assert "é" in accented
    latin = {"content-type": "application/json; charset=ISO-8859-1"}
    return {
        "not JSON": (b"{not json", {}, 400, "invalid_request_error"),
        "empty": (b"", {}, 400, "invalid_request_error"),
        "invalid UTF-8": (b'{"model": "\xff\xfe"}', {}, 400, "invalid_request_error"),
        "an array": (b"[1, 2]", {}, 400, "invalid_request_error"),
        "a number": (b"42", {}, 400, "invalid_request_error"),
        "null": (b"null", {}, 400, "invalid_request_error"),
        "10^5 levels deep": (deep, {}, 400, "invalid_request_error"),
        "NaN": (with_field(body, b'"temperature": NaN'), {}, 400, "invalid_request_error"),
        "Infinity": (with_field(body, b'"top_p": -Infinity'), {}, 400, "invalid_request_error"),
        "a 5,000 digit number": (
            with_field(body, b'"max_tokens": 1' + b"0" * 5000),
            {},
            400,
            "invalid_request_error",
        ),
        "a model not configured": (
            json.dumps({**body, "model": "nope"}).encode(),
            {},
            404,
            "not_found_error",
        ),
        "duplicate keys (the last wins)": (
            with_field(body, b'"model": "nope"'),
            {},
            404,
            "not_found_error",
        ),
        "over the limit, with Content-Length": (
            json.dumps({**body, "pad": "x" * 400_000}).encode(),
            {},
            413,
            "request_too_large",
        ),
        "gzip that inflates past the limit": (
            bomb,
            {"content-encoding": "gzip"},
            413,
            "request_too_large",
        ),
        "not gzip": (plain, {"content-encoding": "gzip"}, 400, "invalid_request_error"),
        "cut gzip": (
            gzip.compress(plain)[:-12],
            {"content-encoding": "gzip"},
            400,
            "invalid_request_error",
        ),
        "brotli": (plain, {"content-encoding": "br"}, 400, "invalid_request_error"),
        "gzip": (gzip.compress(plain), {"content-encoding": "gzip"}, 200, ""),
        "deflate": (zlib.compress(plain), {"content-encoding": "deflate"}, 200, ""),
        # gzip's members in turn, as `cat a.gz b.gz` makes (before: the first alone, cut)
        "gzip of two members": (
            gzip.compress(plain[:20]) + gzip.compress(plain[20:]),
            {"content-encoding": "gzip"},
            200,
            "",
        ),
        "gzip of a member per byte": (
            b"".join(gzip.compress(plain[i : i + 1]) for i in range(len(plain))),
            {"content-encoding": "gzip"},
            200,
            "",
        ),
        "gzip members that together inflate past the limit": (
            gzip.compress(b" " * 200_000) + gzip.compress(b" " * 200_000),
            {"content-encoding": "gzip"},
            413,
            "request_too_large",
        ),
        "gzip of a member and garbage": (
            gzip.compress(plain) + b"garbage",
            {"content-encoding": "gzip"},
            400,
            "invalid_request_error",
        ),
        "gzip of a member and a cut one": (
            gzip.compress(plain) + gzip.compress(b" ")[:-3],
            {"content-encoding": "gzip"},
            400,
            "invalid_request_error",
        ),
        "gzip of more members than a body may have": (
            gzip.compress(b"") * 1024 + gzip.compress(plain),
            {"content-encoding": "gzip"},
            400,
            "invalid_request_error",
        ),
        "deflate and data after it": (
            zlib.compress(plain) + zlib.compress(b" "),
            {"content-encoding": "deflate"},
            400,
            "invalid_request_error",
        ),
        "text/plain": (plain, {"content-type": "text/plain"}, 200, ""),
        "no content-type": (plain, {"content-type": ""}, 200, ""),
        # a body in the charset its content-type names (before: not UTF-8, so "not JSON")
        "latin-1, as its charset says": (accented.encode("latin-1"), latin, 200, ""),
        "UTF-16, as its charset says": (
            accented.encode("utf-16"),
            {"content-type": 'application/json; charset="utf-16"'},
            200,
            "",
        ),
        "UTF-8 said to be latin-1": (accented.encode(), latin, 200, ""),  # read as it says
        "latin-1 said to be UTF-16": (
            accented.encode("latin-1")[:-1],
            {"content-type": "application/json; charset=utf-16"},
            400,
            "invalid_request_error",
        ),
        "a charset not known": (
            plain,
            {"content-type": "application/json; charset=base64"},
            400,
            "invalid_request_error",
        ),
    }


async def test_bad_bodies_get_the_callers_error_shape(emulator: Emulator) -> None:
    app = create_app(gateway_config(emulator, {"max_request_bytes": 300_000}))
    async with client(app) as gw:
        for label, api, path, body in each_route():
            for name, (raw, headers, status, kind) in body_cases(body).items():
                sent = {k: v for k, v in {**HEADERS, **headers}.items() if v}
                reply = await gw.post(path, content=raw, headers=sent)
                case = f"{label}: {name}: {reply.status_code} {reply.text[:300]}"
                assert reply.status_code == status, case
                if status != 200:
                    openai = "invalid_request_error/" + {404: "model_not_found"}.get(
                        status, "request_too_large" if status == 413 else "None"
                    )
                    assert error_of(api, reply) == expect(api, kind, openai), case


async def test_a_body_compressed_without_content_encoding_is_said_to_be(
    emulator: Emulator,
) -> None:
    """Before: gzip's bytes sent with no Content-Encoding were "not valid JSON" and no more;
    now the 400 says the body looks compressed and the header is missing, on every route."""
    app = create_app(gateway_config(emulator))
    async with client(app) as gw:
        for label, api, path, body in each_route():
            raw = gzip.compress(json.dumps(body).encode())
            reply = await gw.post(path, content=raw, headers=HEADERS)
            case = f"{label}: {reply.status_code} {reply.text[:300]}"
            assert reply.status_code == 400, case
            assert error_of(api, reply).startswith("invalid_request_error"), case
            message = reply.json()["error"]["message"]
            assert "gzip-compressed" in message and "Content-Encoding" in message, case
        reply = await gw.post("/v1/messages", content=b"{not json", headers=HEADERS)
        assert "compressed" not in reply.json()["error"]["message"], reply.text


@pytest.mark.parametrize(
    ("charset", "encoding", "read"),
    [
        ("iso-8859-1", "latin-1", "Café?"),
        ("utf-16", "utf-16", "Café?"),
        ("iso-8859-1", "utf-8", "CafÃ©?"),  # UTF-8 bytes said to be latin-1: read as said
    ],
)
async def test_a_body_is_read_in_the_charset_its_content_type_names(
    emulator: Emulator, charset: str, encoding: str, read: str
) -> None:
    """The words the model is given are the body's read in that charset, not only a 200."""
    app = create_app(gateway_config(emulator))
    said = [{"role": "user", "content": "Café?"}]
    body = {"model": "sonnet", "max_tokens": 50, "messages": said}
    raw = json.dumps(body, ensure_ascii=False).encode(encoding)
    headers = {**HEADERS, "content-type": f"application/json; charset={charset}"}
    async with client(app) as gw:
        reply = await gw.post("/v1/messages", content=raw, headers=headers)
    assert reply.status_code == 200, reply.text
    assert reply.json()["content"][0]["text"] == f"You said: {read}"


async def test_a_body_over_the_limit_without_content_length_is_413(emulator: Emulator) -> None:
    app = create_app(gateway_config(emulator, {"max_request_bytes": 300_000}))
    async with client(app) as gw:
        for label, api, path, body in each_route():
            raw = json.dumps({**body, "pad": "x" * 400_000}).encode()
            reply = await gw.post(path, content=chunked(raw), headers=HEADERS)
            case = f"{label}: {reply.status_code} {reply.text[:300]}"
            assert "content-length" not in reply.request.headers, case
            assert reply.status_code == 413, case
            assert error_of(api, reply) == expect(
                api, "request_too_large", "invalid_request_error/request_too_large"
            ), case


WRONG = [None, 0, -1, 1.5, 10**30, "s", True, [], {}, [1], [None], [{}], {"a": 1}]
FIELDS = [
    "model",
    "messages",
    "input",
    "stream",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "temperature",
    "top_p",
    "stop",
    "stop_sequences",
    "system",
    "instructions",
    "tools",
    "tool_choice",
    "thinking",
    "reasoning",
    "reasoning_effort",
    "response_format",
    "text",
    "stream_options",
    "metadata",
    "previous_response_id",
    "store",
    "parallel_tool_calls",
    "n",
    "zzz_not_a_field",
]
NESTED: list[Any] = [
    [1],
    ["x"],
    [None],
    [{}],
    [{"role": "user"}],
    [{"content": "x"}],
    [{"role": "bogus", "content": "x"}],
    [{"role": "user", "content": 1}],
    [{"role": "user", "content": [1]}],
    [{"role": "user", "content": [{}]}],
    [{"role": "user", "content": [{"type": "text"}]}],
    [{"role": "user", "content": [{"type": "text", "text": 1}]}],
    [{"role": "user", "content": [{"type": "image", "source": 1}]}],
    [{"role": "user", "content": [{"type": "image_url", "image_url": 1}]}],
    [{"role": "user", "content": [{"type": "input_image"}]}],
    [{"role": "assistant", "content": [{"type": "tool_use", "id": 1, "name": 2, "input": 3}]}],
    [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": 1, "content": 2}]}],
    [{"role": "assistant", "tool_calls": 1}],
    [{"role": "assistant", "tool_calls": [1]}],
    [{"role": "assistant", "tool_calls": [{}]}],
    [{"role": "tool", "tool_call_id": 5, "content": "x"}],
    [{"type": "function_call", "call_id": 1, "name": 2, "arguments": 3}],
    [{"type": "function_call_output"}],
    [{"type": "reasoning", "summary": 1}],
    [{"type": "bogus"}],
]
TOOLS: list[Any] = [
    [1],
    [None],
    [{}],
    [{"name": 1}],
    [{"type": "function", "function": 1}],
    [{"type": "function", "function": {"name": "f", "parameters": 1}}],
    [{"name": "f", "input_schema": 1}],
    [{"type": "function", "name": "f", "parameters": "x"}],
    [{"type": "custom"}],
]


def wrong_bodies(
    api: str, body: dict[str, Any], fields: list[str]
) -> Iterator[tuple[str, dict[str, Any]]]:
    for key in fields:
        for value in WRONG:
            yield f"{key}={value!r}", {**body, key: value}
    messages = "input" if api == "responses" else "messages"
    for nested in NESTED:
        yield f"{messages}={json.dumps(nested)}", {**body, messages: nested}
    for tools in TOOLS:
        yield f"tools={json.dumps(tools)}", {**body, "tools": tools}
    yield "empty messages", {**body, messages: []}


async def sweep(emulator: Emulator, fields: list[str]) -> None:
    """Every wrong body answered 200 (what cannot be honoured is left out, item 4) or 4xx in
    the caller's shape; never a 5xx."""
    app = create_app(gateway_config(emulator))
    async with client(app) as gw:
        for label, api, path, body in each_route():
            for name, wrong in wrong_bodies(api, body, fields):
                once = api == "count_tokens" or name.startswith("stream=")
                for streamed in (False,) if once else (False, True):
                    sent = {**wrong, "stream": True} if streamed else wrong
                    reply = await gw.post(path, json=sent, headers=HEADERS)
                    case = f"{label}: {name}: {reply.status_code} {reply.text[:300]}"
                    assert reply.status_code == 200 or 400 <= reply.status_code < 500, case
                    if reply.status_code != 200:
                        error_of(api, reply)


async def test_a_wrong_type_in_a_few_fields_is_a_4xx_or_left_out(emulator: Emulator) -> None:
    await sweep(emulator, ["input", "stream", "tools"])


@pytest.mark.slow
async def test_a_wrong_type_in_any_field_is_a_4xx_or_left_out(emulator: Emulator) -> None:
    await sweep(emulator, FIELDS)


async def test_an_unknown_field_on_the_translated_path_is_left_out_and_said(
    emulator: Emulator,
) -> None:
    app = create_app(gateway_config(emulator))
    async with client(app) as gw:
        for label, api, path, body in each_route():
            if api == "count_tokens" or body["model"] != "flash":
                continue
            for streamed in (False, True):
                sent = {**body, "stream": streamed, "zzz_unknown": {"a": 1}}
                reply = await gw.post(path, json=sent, headers=HEADERS)
                case = f"{label} stream={streamed}: {reply.status_code} {reply.text[:300]}"
                assert reply.status_code == 200, case
                assert "zzz_unknown" in reply.headers.get("x-metis-dropped", ""), case


NESTED_UNKNOWN = {
    # api -> a body with a field no API has in a message, a content part and a tool
    "anthropic": {
        "max_tokens": 2000,
        "messages": [
            {"role": "user", "zzz": 1, "content": [{"type": "text", "text": "Hi", "zzz": 2}]}
        ],
        "tools": [{"name": "f", "input_schema": {"type": "object"}, "zzz": 3}],
        "thinking": {"type": "enabled", "budget_tokens": 1024, "zzz": 4},
    },
    "chat": {
        "messages": [
            {"role": "user", "zzz": 1, "content": [{"type": "text", "text": "Hi", "zzz": 2}]}
        ],
        "tools": [{"type": "function", "function": {"name": "f", "zzz": 3}, "zzz": 4}],
    },
    "responses": {
        "input": [
            {"role": "user", "zzz": 1, "content": [{"type": "input_text", "text": "Hi", "zzz": 2}]}
        ],
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}, "zzz": 3}],
        "reasoning": {"effort": "low", "zzz": 4},
    },
}


async def test_an_unknown_field_inside_a_message_part_or_tool_is_never_refused(
    emulator: Emulator,
) -> None:
    """The canonical objects refuse unknown fields (docs/contract.md §14); a client's are its
    API's, which the gateway's readers leave out (item 4): never a 400 or a 500."""
    app = create_app(gateway_config(emulator))
    async with client(app) as gw:
        for label, api, path, body in each_route():
            if api not in NESTED_UNKNOWN:
                continue
            for streamed in (False, True):
                sent = {"model": body["model"], "stream": streamed, **NESTED_UNKNOWN[api]}
                reply = await gw.post(path, json=sent, headers=HEADERS)
                assert reply.status_code == 200, f"{label} stream={streamed}: {reply.text[:300]}"
                if body["model"] == "flash":  # translated: each is named where it was
                    named = reply.headers.get("x-metis-dropped", "").split("; ")
                    assert set(NESTED_NAMES[api]) <= set(named), (label, named)


NESTED_NAMES = {
    "anthropic": ["messages[0].zzz", "messages[0].content[0].zzz", "tools[0].zzz", "thinking.zzz"],
    "chat": [
        "messages[0].zzz",
        "messages[0].content[0].zzz",
        "tools[0].zzz",
        "tools[0].function.zzz",
    ],
    "responses": ["input[0].zzz", "input[0].content[0].zzz", "tools[0].zzz", "reasoning.zzz"],
}


HTTP_CASES: list[tuple[str, str, str, dict[str, str], int, str]] = [
    # (case, method, path, headers, status, Anthropic type or OpenAI type/code)
    ("GET a POST path", "GET", "/v1/messages", {}, 405, "invalid_request_error"),
    ("PUT chat", "PUT", "/v1/chat/completions", {}, 405, "invalid_request_error/None"),
    ("DELETE responses", "DELETE", "/v1/responses", {}, 405, "invalid_request_error/None"),
    ("POST the models", "POST", "/v1/models", {}, 405, "invalid_request_error/None"),
    ("a path not served", "POST", "/v1/nothing", {}, 404, "invalid_request_error/None"),
    ("a model by id", "GET", "/v1/models/sonnet", {}, 200, ""),  # models.retrieve
    ("an unknown model by id", "GET", "/v1/models/nope", {}, 404, ""),
    ("Anthropic's unknown path", "POST", "/v1/messages/x", {}, 404, "not_found_error"),
    ("a trailing slash", "POST", "/v1/messages/", {}, 200, ""),
    ("a chat trailing slash", "POST", "/v1/chat/completions/", {}, 200, ""),
    ("a query string", "POST", "/v1/messages?beta=true", {}, 200, ""),
    ("odd header casing", "POST", "/v1/messages", {"X-Api-KEY": GATEWAY_KEY}, 200, ""),
    ("BEARER", "POST", "/v1/messages", {"AUTHORIZATION": "BEARER " + GATEWAY_KEY}, 200, ""),
    (
        "both headers, the bearer right",
        "POST",
        "/v1/messages",
        {"x-api-key": "sk-ant-provider", "authorization": "Bearer " + GATEWAY_KEY},
        200,
        "",
    ),
    (
        "both headers, the x-api-key right",
        "POST",
        "/v1/messages",
        {"x-api-key": GATEWAY_KEY, "authorization": "Bearer sk-ant-provider"},
        200,
        "",
    ),
    (
        "both headers, neither right",
        "POST",
        "/v1/messages",
        {"x-api-key": "a", "authorization": "Bearer b"},
        401,
        "authentication_error",
    ),
    ("no key", "POST", "/v1/messages", {"x-api-key": ""}, 401, "authentication_error"),
    ("Basic auth", "POST", "/v1/messages", {"x-api-key": "", "authorization": "Basic x"}, 401, ""),
    ("a wrong version", "POST", "/v1/messages", {"anthropic-version": "2099-01-01"}, 400, ""),
    ("an empty version", "POST", "/v1/messages", {"anthropic-version": ""}, 400, ""),
    ("the previous version", "POST", "/v1/messages", {"anthropic-version": "2023-06-01"}, 200, ""),
    (
        "a version on chat is not Anthropic's",
        "POST",
        "/v1/chat/completions",
        {"anthropic-version": "x"},
        200,
        "",
    ),
]


async def test_methods_paths_and_auth_headers(emulator: Emulator) -> None:
    app = create_app(gateway_config(emulator))
    body = {"model": "sonnet", "max_tokens": 20, "messages": SAID}
    async with client(app) as gw:
        for case, method, path, headers, status, kind in HTTP_CASES:
            sent = {"x-api-key": GATEWAY_KEY, "content-type": "application/json"}
            for name, value in headers.items():
                sent.pop(name.lower(), None)
                sent[name] = value
            content = json.dumps(body).encode() if method == "POST" else None
            reply = await gw.request(method, path, headers=sent, content=content)
            said = f"{case}: {reply.status_code} {reply.text[:300]}"
            assert reply.status_code == status, said
            if status != 200:
                api = "anthropic" if path.startswith("/v1/messages") else "chat"
                found = error_of(api, reply)
                assert not kind or found == kind, said
            if status == 405:
                assert reply.headers["allow"], said


def keyed_config(emulator: Emulator, **gateway: Any) -> Any:
    digest = hashlib.sha256(b"team-key").hexdigest()
    keys = [{"name": "team", "sha256": digest, "models": ["flash"]}]
    return gateway_config(emulator, {"keys": keys, **gateway})


async def test_a_key_without_access_to_the_model_is_403_everywhere(emulator: Emulator) -> None:
    app = create_app(keyed_config(emulator))
    async with client(app) as gw:
        for label, api, path, body in each_route():
            headers = {"x-api-key": "team-key"}
            reply = await gw.post(path, json=body, headers=headers)
            case = f"{label}: {reply.status_code} {reply.text[:300]}"
            if body["model"] == "flash":
                assert reply.status_code == 200, case
                continue
            assert reply.status_code == 403, case
            assert error_of(api, reply) == expect(
                api, "permission_error", "invalid_request_error/model_not_allowed"
            ), case


class Counting:
    """A model whose token count fails as ``count`` says."""

    def __init__(self, count: Any) -> None:
        self.count_tokens = count


def counted_by(app: Any, count: Any) -> None:
    caps = AdapterCapabilities(max_output_tokens=100)
    model = Counting(count)
    app.state.gateway.models.resolve = lambda name: Target(name, model, "x:y", caps, "y")


@pytest.mark.backend_independent(False)
async def test_count_tokens_failures_are_classified_and_bounded(emulator: Emulator) -> None:
    async def never(request: Any) -> Any:
        await anyio.sleep_forever()

    async def broken(request: Any) -> Any:
        return {}["input_tokens"]  # a bug below the gateway: a KeyError

    body = {"model": "sonnet", "messages": SAID}
    for case, count, status, kind in (
        ("an upstream that never answers", never, 504, "timeout_error"),
        ("a bug below", broken, 500, "api_error"),
    ):
        app = create_app(gateway_config(emulator, {"request_timeout_seconds": 0.05}))
        counted_by(app, count)
        async with client(app) as gw:
            with anyio.fail_after(30):  # a bound on a hang, not a timing
                reply = await gw.post("/v1/messages/count_tokens", json=body, headers=HEADERS)
            said = f"{case}: {reply.status_code} {reply.text[:300]}"
            assert reply.status_code == status and error_of("anthropic", reply) == kind, said
            metrics = (await gw.get("/metrics")).text
            assert 'metis_gateway_errors_total{api="anthropic"' in metrics, said


async def test_odd_field_and_model_names_stay_out_of_headers_and_bounded(
    emulator: Emulator,
) -> None:
    """A field left out is named in ``x-metis-dropped``: a name with a control character (which
    ends the connection when a server writes it in a header) is written printable. A model
    name of any length is refused without echoing it whole."""
    app = create_app(gateway_config(emulator))
    body = {"model": "flash", "max_tokens": 20, "messages": SAID}
    async with client(app) as gw:
        for name in ("a\x00b", "a\x7fb", "a\tb", "é", "a\u2028b", "a\r\nSet-Cookie: x"):
            reply = await gw.post("/v1/messages", json={**body, name: 1}, headers=HEADERS)
            case = f"{name!r}: {reply.status_code} {reply.headers}"
            dropped = reply.headers.get("x-metis-dropped", "")
            assert reply.status_code == 200 and dropped, case
            assert all(" " <= c <= "~" for c in dropped), case
        for label, api, path, body in each_route():
            long = {**body, "model": "m" * 1_000_000}
            reply = await gw.post(path, json=long, headers=HEADERS)
            case = f"{label}: {reply.status_code} {reply.text[:300]}"
            assert reply.status_code == 404 and len(reply.content) < 1000, case
            error_of(api, reply)


@pytest.mark.parametrize("piece", [1, 7, 4096])
def test_gzip_members_are_read_across_any_split_of_the_body(piece: int) -> None:
    from metis.gateway.body import decompressor

    text = b'{"a": "' + b"x" * 3000 + b'"}'
    members = b"".join(gzip.compress(text[i : i + 1000]) for i in range(0, len(text), 1000))
    inflater = decompressor("gzip")
    assert inflater is not None
    out = b"".join(
        inflater.inflate(members[i : i + piece], 10_000) for i in range(0, len(members), piece)
    )
    assert out == text and inflater.eof
    bomb = gzip.compress(b" " * 100_000) * 3
    inflater = decompressor("gzip")
    assert inflater is not None
    assert len(inflater.inflate(bomb, 150_000)) == 150_001  # one past the room: too large


async def test_a_key_header_given_twice_with_different_values_is_refused(
    emulator: Emulator,
) -> None:
    """Before: the first ``x-api-key`` (or ``Authorization``) was read and the others ignored,
    so which key a request ran under depended on the order of its headers (a proxy in front
    that adds its own after the client's let the client's win). Now a key header given twice
    with different values is a 400 in the caller's shape (a ``/metrics`` scrape so made is
    refused, 401, saying why); given twice the same, it is the one key."""
    app = create_app(gateway_config(emulator, {"metrics": {"api_key_env": "GATEWAY_KEY"}}))
    body = {"model": "sonnet", "max_tokens": 20, "messages": SAID}
    bearer = "Bearer " + GATEWAY_KEY
    cases = [
        ("x-api-key, the right one first", [("x-api-key", GATEWAY_KEY), ("x-api-key", "b")], 400),
        ("x-api-key, the right one last", [("x-api-key", "b"), ("x-api-key", GATEWAY_KEY)], 400),
        ("authorization twice", [("authorization", bearer), ("authorization", "Bearer b")], 400),
        ("x-api-key twice the same", [("x-api-key", GATEWAY_KEY)] * 2, 200),
    ]
    async with client(app) as gw:
        for case, headers, status in cases:
            for api, path in (("anthropic", "/v1/messages"), ("chat", "/v1/chat/completions")):
                sent = {**body, "model": "sonnet" if api == "anthropic" else "gpt"}
                reply = await gw.post(path, json=sent, headers=headers)
                said = f"{case}, {api}: {reply.status_code} {reply.text[:300]}"
                assert reply.status_code == status, said
                if status == 400:
                    assert error_of(api, reply).startswith("invalid_request_error"), said
                    assert "given 2 times" in reply.text, said
            scrape = await gw.get("/metrics", headers=headers)
            assert scrape.status_code == (200 if status == 200 else 401), (case, scrape.text)
            assert status == 200 or "given 2 times" in scrape.text, (case, scrape.text)


async def test_an_openai_shaped_refusal_of_a_field_names_it_as_param(emulator: Emulator) -> None:
    """OpenAI's error names the field it refuses in ``param`` (the SDK's ``BadRequestError
    .param``); the gateway's own refusals said it only in the message, ``param`` null. Now
    a refusal the gateway's readers make of one field names it there too; one of no field
    (a body that is not JSON) and the provider's own keep ``param`` null."""
    app = create_app(gateway_config(emulator))
    cases = [
        ("/v1/chat/completions", {"model": "flash", "temperature": "hot"}, "temperature"),
        ("/v1/chat/completions", {"model": "flash", "tools": [1]}, "tools[0].function"),
        ("/v1/responses", {"model": "flash", "input": [1]}, "input[0]"),
        ("/v1/responses", {"model": "flash", "stream": "yes"}, "stream"),
        ("/v1/embeddings", {"model": "flash", "input": [None]}, "input[0]"),
        ("/v1/chat/completions", {"model": 5}, "model"),
    ]
    said = {"messages": SAID, "input": "Hi"}
    async with client(app) as gw:
        for path, body, param in cases:
            sent = {key: said[key] for key in said if key not in body} | body
            if path == "/v1/chat/completions":
                sent.pop("input", None)
            else:
                sent.pop("messages", None)
            reply = await gw.post(path, json=sent, headers=HEADERS)
            case = f"{path} {body}: {reply.status_code} {reply.text[:300]}"
            assert reply.status_code == 400 and reply.json()["error"]["param"] == param, case
        reply = await gw.post("/v1/chat/completions", content=b"{not", headers=HEADERS)
        assert reply.status_code == 400 and reply.json()["error"]["param"] is None, reply.text


async def test_a_content_length_of_a_superscript_is_a_400_in_the_callers_shape(
    emulator: Emulator,
) -> None:
    """Before: ``"²".isdigit()`` let the header through to ``int()``, whose ValueError was a
    500. Now a 400 saying what the header held, in the API's own error shape."""
    app = create_app(gateway_config(emulator))
    async with client(app) as gw:
        for api in ("anthropic", "chat"):
            path, body, model = APIS[api]
            raw = json.dumps({"model": model, **body}).encode()
            headers = {**HEADERS, "content-length": b"\xb2"}  # latin-1, as Starlette reads it
            reply = await gw.post(path, content=raw, headers=headers)
            assert reply.status_code == 400, (api, reply.text)
            assert "Content-Length '²'" in reply.text, reply.text
            assert error_of(api, reply) == expect(
                api, "invalid_request_error", "invalid_request_error/None"
            )
