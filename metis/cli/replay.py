"""``metis replay CASSETTE``: a cassette's recorded responses through its provider's stack.

The provider is ``--provider`` or inferred from the recorded URL (a stack whose endpoint path
it ends with, preferring the one whose host it is). Each interaction to that endpoint becomes
one call: the model and streaming come from the recorded request, the rest of the request is
a stand-in (the transport serves the recording whatever the body says: bodies are not
checked), and the canonical events are printed one a line (``--json``: JSON lines).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import yaml
from pydantic import ValidationError

from metis.adapter.adapter import build_adapter
from metis.cli.output import CliError, Output
from metis.model.content import Message
from metis.model.events import (
    MessageComplete,
    MessageStart,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.request import CanonicalRequest
from metis.pipeline.config import AdapterConfig
from metis.pipeline.stores import InMemoryToolIdStore
from metis.stacks.loader import StackSpec, builtin_stacks, load_stack
from metis.testing.cassette import Cassette, Interaction, ReplayTransport

PREFERRED = ("anthropic", "openai", "openai_responses", "gemini", "ollama")


def run(args: argparse.Namespace) -> int:
    path = Path(args.cassette)
    if path.is_dir():
        inside = ", ".join(sorted(f.name for f in path.glob("*.yaml"))[:8]) or "none"
        raise CliError(f"{path} is a folder; name one of its cassettes (its .yaml files: {inside})")
    if not path.is_file():
        raise CliError(f"no cassette at {path}")
    cassette = load_cassette(path)
    if not cassette.interactions:
        raise CliError(f"{path}: the cassette records no interactions")
    spec = load_stack(args.provider) if args.provider else infer_stack(cassette)
    calls = [i for i in cassette.interactions if _pattern(spec).search(_path(i.request.url))]
    if not calls:
        raise CliError(
            f"{path}: no interaction is a call to {spec.name}'s endpoint {spec.endpoint.path}"
        )
    return anyio.run(_replay, spec, Cassette(name=cassette.name, interactions=calls), args.json)


async def _replay(spec: StackSpec, cassette: Cassette, as_json: bool) -> int:
    out = Output()
    transport = ReplayTransport(cassette, check_body=False)
    store = InMemoryToolIdStore()
    session = f"replay-{cassette.name or 'cassette'}"
    async with httpx.AsyncClient(transport=transport) as client:
        for number, interaction in enumerate(cassette.interactions, 1):
            model, stream = _model_and_stream(spec, interaction)
            config = AdapterConfig(
                api_key="replay",
                base_url=_base_url(spec, interaction.request.url, model, stream),
                max_retries=0,
                http_client=client,
                capabilities={"supports_streaming": stream},
            )
            adapter = build_adapter(spec, config, tool_id_store=store)
            if not as_json:
                kind = "streamed" if stream else "not streamed"
                out.line(
                    f"# {number}/{len(cassette.interactions)} {spec.name} {model} ({kind}): "
                    f"{interaction.request.method} {interaction.request.url}",
                    "dim",
                )
            request = CanonicalRequest(
                model=f"{spec.name}:{model}",
                session_id=session,
                messages=[Message.user("(replayed from a cassette)")],
                max_output_tokens=min(1024, adapter.capabilities.max_output_tokens),
            )
            async for event in adapter.stream(request):
                text = json.dumps(event.to_dict(), ensure_ascii=False) if as_json else line(event)
                out.line(text)
    return 0


def line(event: StreamEvent) -> str:
    """One event as one readable line."""
    kind = event.type.ljust(20)
    if isinstance(event, MessageStart):
        return f"{kind} id={event.message_id} model={event.model}"
    if isinstance(event, TextDelta):
        return f"{kind} [{event.content_block_index}] {json.dumps(event.text, ensure_ascii=False)}"
    if isinstance(event, ThinkingDelta):
        extra = " signature" if event.signature else ""
        extra += " redacted" if event.redacted_data else ""
        text = json.dumps(event.thinking, ensure_ascii=False)
        return f"{kind} [{event.content_block_index}] {text}{extra}"
    if isinstance(event, ToolUseStart):
        return f"{kind} [{event.content_block_index}] {event.tool_name} {event.tool_use_id}"
    if isinstance(event, ToolUseInputDelta):
        fragment = json.dumps(event.partial_json, ensure_ascii=False)
        return f"{kind} [{event.content_block_index}] {fragment}"
    if isinstance(event, ToolUseEnd):
        args = json.dumps(event.final_input, ensure_ascii=False)
        return f"{kind} [{event.content_block_index}] {event.tool_name}({args})"
    if isinstance(event, MessageComplete):
        usage = event.usage
        blocks = ", ".join(b.type for b in event.final_content) or "no content"
        return (
            f"{kind} stop={event.stop_reason.kind.value} (raw {event.stop_reason.raw!r}) "
            f"in={usage.input_tokens} out={usage.output_tokens} "
            f"cache_read={usage.cached_input_tokens} "
            f"cache_write={usage.cache_creation_input_tokens} content: {blocks}"
        )
    return f"{kind} {json.dumps(event.to_dict(), ensure_ascii=False)}"


def load_cassette(path: Path) -> Cassette:
    try:
        return Cassette.load(path)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise CliError(f"{path} is not a cassette: not valid YAML{where}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "top level"
        raise CliError(f"{path} is not a cassette: {where}: {first['msg']}") from None


# Which stack, model and URL a recording belongs to -------------------------------------------


def infer_stack(cassette: Cassette) -> StackSpec:
    """The stack whose endpoint the first interaction called (its host breaks ties)."""
    url = cassette.interactions[0].request.url
    host = urlsplit(url).hostname or ""
    found: list[tuple[tuple[bool, bool, bool, int], StackSpec]] = []
    for name in builtin_stacks():
        spec = load_stack(name)
        match = _pattern(spec).search(_path(url))
        if match is None:
            continue
        same_host = _host_pattern(spec).fullmatch(host) is not None
        whole_path = match.start() == 0
        fixed_host = "{" not in spec.endpoint.base_url  # not a host of the caller's own
        rank = PREFERRED.index(name) if name in PREFERRED else len(PREFERRED)
        found.append(((same_host, whole_path, fixed_host, -rank), spec))
    if not found:
        raise CliError(
            f"cannot tell the provider of {url}; name it with --provider "
            f"({', '.join(builtin_stacks())} or a stack file)"
        )
    return max(found, key=lambda item: item[0])[1]


def _host_pattern(spec: StackSpec) -> re.Pattern[str]:
    """The endpoint's host, a ``{resource}`` in it standing for any one DNS label."""
    base_url = spec.endpoint.base_url
    if "{" not in base_url:
        return re.compile(re.escape(urlsplit(base_url).hostname or ""))
    template = base_url.split("//", 1)[-1].split("/", 1)[0].split(":", 1)[0].lower()
    return re.compile(re.sub(r"\\\{\w+\\\}", "[^.]+", re.escape(template)))


def _path(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _pattern(spec: StackSpec) -> re.Pattern[str]:
    """The endpoint's path (or stream path) at the end of a URL path, ``{model}`` captured."""
    paths = [p for p in (spec.endpoint.stream_path, spec.endpoint.path) if p]
    named = []
    for i, path in enumerate(paths):
        escaped = re.escape(path).replace(re.escape("{model}"), f"(?P<m{i}>[^/]+?)")
        named.append(re.sub(r"\\\{\w+\\\}", "[^/]+", escaped))  # {project}, {location}
    return re.compile("(?:" + "|".join(named) + ")$")


def _model_and_stream(spec: StackSpec, interaction: Interaction) -> tuple[str, bool]:
    body: dict[str, Any] = interaction.request.body or {}
    url = interaction.request.url
    match = _pattern(spec).search(_path(url))
    from_url = next((v for v in (match.groupdict() if match else {}).values() if v), None)
    model = body.get("model") if isinstance(body.get("model"), str) else from_url
    if not model:
        raise CliError(f"cannot tell the model of the call to {url}: the recording names none")
    stream_path = spec.endpoint.stream_path
    if stream_path and "{model}" in stream_path:
        stream = _path(url).endswith(stream_path.replace("{model}", model))
    elif "stream" in body:
        stream = bool(body["stream"])
    else:
        content_type = interaction.response.headers.get("content-type", "")
        stream = "event-stream" in content_type or "ndjson" in content_type
    return str(model), stream


def _base_url(spec: StackSpec, url: str, model: str, stream: bool) -> str:
    path = spec.endpoint.stream_path if stream and spec.endpoint.stream_path else spec.endpoint.path
    tail = path.replace("{model}", model)
    if not url.endswith(tail):
        raise CliError(f"{url} is not {spec.name}'s endpoint {tail}")
    return url[: len(url) - len(tail)]
