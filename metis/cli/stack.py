"""``metis stack PROVIDER``: the pipeline a provider's adapter is built from, stage by stage.

For each stage: its options (those not at their defaults) and the types it takes and gives,
from ``Stage.signature()``, resolved along the stack the way the pipeline checks them (a
stage that leaves a side untouched, ``Any``, passes on what its neighbour handed it). The
request travels down the list; the events travel back up it. ``--mermaid`` prints the same
as a Mermaid flowchart.
"""

from __future__ import annotations

import argparse
import json
import types
import typing
from dataclasses import dataclass
from typing import Any

import yaml

from metis.cli.output import CliError, Output, import_modules
from metis.errors import StackError
from metis.model.capabilities import AdapterCapabilities
from metis.model.request import CanonicalRequest
from metis.pipeline.segments import stage_kind
from metis.stacks.assembly import SKELETON_SOURCE
from metis.stacks.loader import StackSpec, load_stack

OPTION_WIDTH = 48
_FLAGS = {
    "supports_tools": "tools",
    "tools_emulated": "tools emulated",
    "supports_parallel_tool_calls": "parallel tool calls",
    "supports_streaming_tool_calls": "streamed tool input",
    "supports_images": "images",
    "supports_thinking": "thinking",
    "supports_system_prompt": "system prompt",
    "supports_structured_output": "structured output",
    "supports_strict_tools": "strict tools",
    "supports_stop_sequences": "stop sequences",
    "supports_streaming": "streaming",
    "supports_prompt_caching": "prompt caching",
}


@dataclass(frozen=True, slots=True)
class StageView:
    index: int
    name: str
    options: dict[str, Any]
    request_in: str
    request_out: str
    items_in: str
    items_out: str
    kind: str = ""
    """How the engine runs it (transform, hook, wrapper, send) and, for a provider stage, the
    part it is (docs/engine.md)."""


def run(args: argparse.Namespace) -> int:
    import_modules(args.imports)
    try:
        spec = load_stack(args.provider)
        views = describe(spec)
    except StackError as exc:
        if "unknown stage" in str(exc) and not args.imports:
            raise CliError(
                f"{exc} (a custom stage? --import the module that registers it)"
            ) from None
        raise
    out = Output()
    if args.mermaid:
        for line in mermaid(spec, views):
            out.line(line)
    else:
        show(out, spec, views, verbose=args.verbose)
    return 0


def describe(spec: StackSpec) -> list[StageView]:
    """The stages in call order, with the types flowing across each."""
    stages = spec.build_pipeline().stages
    requests: list[tuple[str, str]] = []
    current: Any = CanonicalRequest
    for stage in stages:
        sig = stage.signature()
        after = current if sig.request_out is Any else sig.request_out
        if stage.terminal:
            after = "HTTP"
        requests.append((type_name(current), type_name(after)))
        current = after
    items: list[tuple[str, str]] = []
    produced: Any = "HTTP"
    for stage in reversed(stages):
        sig = stage.signature()
        given = produced if sig.items_out is Any else sig.items_out
        items.append((type_name(produced), type_name(given)))
        produced = given
    items.reverse()
    return [
        StageView(
            i + 1,
            stage.name,
            stage.options.model_dump(mode="json", exclude_defaults=True),
            *requests[i],
            *items[i],
            kind_text(stage),
        )
        for i, stage in enumerate(stages)
    ]


def kind_text(stage: Any) -> str:
    """``transform``, ``hook``, ``wrapper`` or ``send``, with the provider part it is."""
    role = getattr(stage, "role", None)
    kind = "send" if role in ("reader", "framing", "transport") else stage_kind(stage)
    return f"{kind} ({role})" if role else kind


def type_name(t: Any) -> str:
    if isinstance(t, str):
        return t
    if t is Any:
        return "Any"
    if isinstance(t, types.UnionType):
        return " | ".join(type_name(member) for member in typing.get_args(t))
    if typing.get_args(t):
        return repr(t).replace("typing.", "")
    return getattr(t, "__name__", None) or repr(t)


def _flow(before: str, after: str) -> str:
    return before if before == after else f"{before} → {after}"


def options_text(options: dict[str, Any], width: int | None = OPTION_WIDTH) -> str:
    parts = [
        f"{k}={v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
        for k, v in options.items()
    ]
    text = " ".join(parts)
    if width is not None and len(text) > width:
        return text[: width - 1] + "…"
    return text


def capabilities_text(caps: AdapterCapabilities) -> str:
    per_model = ("supports_structured_output", "supports_strict_tools")
    flags = [
        f"{label} (per model)" if caps.structured_output_per_model and field in per_model else label
        for field, label in _FLAGS.items()
        if getattr(caps, field)
    ]
    sizes = f"context {caps.max_context_tokens}, output {caps.max_output_tokens} tokens"
    return f"{', '.join(flags) or 'none'}; {sizes}"


def endpoint_text(spec: StackSpec) -> str:
    """Where the stack sends, with the base URL the SDK's variable gives when it is set (as
    an adapter built now would), and the variable named either way."""
    from metis.pipeline.endpoint import sdk_root_path, without_overlap

    variable = spec.endpoint.base_url_env
    given = spec.endpoint.env_base_url()
    path = spec.endpoint.path
    if given and spec.endpoint.versioned_base_url:
        path = sdk_root_path(given, path)
    base = without_overlap(given, path) if given else spec.endpoint.base_url
    text = f"POST {base.rstrip('/')}{path}"
    if spec.endpoint.stream_path:
        text += f" (streamed: {spec.endpoint.stream_path})"
    if variable:
        text += f"; base URL from ${variable}" if given else f"; ${variable} replaces the base URL"
    return text


def auth_text(spec: StackSpec) -> str:
    auth = spec.auth
    if not auth.header and not auth.env:
        return "none"
    scheme = f"{auth.scheme} " if auth.scheme else ""
    text = f"{auth.header}: {scheme}<key>" if auth.header else "no header"
    if auth.env:
        text += f", key from ${auth.env}"
    return text + (" (optional)" if auth.optional else "")


def show(out: Output, spec: StackSpec, views: list[StageView], *, verbose: bool) -> None:
    title = out.style(spec.name, "bold")
    out.line(f"{title}: {spec.description}" if spec.description else title)
    facts = [
        ("source", spec.source),
        ("endpoint", endpoint_text(spec)),
        ("auth", auth_text(spec)),
        ("headers", ", ".join(f"{k}: {v}" for k, v in spec.headers.items()) or "none"),
        ("capabilities", capabilities_text(spec.capabilities)),
    ]
    if spec.codec:
        facts.insert(
            1, ("codec", spec.codec + (f", framing {spec.framing}" if spec.framing else ""))
        )
    sources = set(spec.stage_sources.values())
    inherited = sorted(sources - {spec.source, SKELETON_SOURCE})
    if inherited:
        facts.insert(1, ("extends", ", ".join(inherited)))
    for label, value in facts:
        out.line(f"  {out.style(label.ljust(13), 'dim')}{value}")
    out.line()
    out.line(f"stages: the request goes down, the events come back up ({len(views)} stages)", "dim")
    rows = [
        [
            str(v.index),
            v.name,
            _flow(v.request_in, v.request_out),
            _flow(v.items_in, v.items_out),
            options_text(v.options, None if verbose else OPTION_WIDTH),
        ]
        for v in views
    ]
    for row, view in zip(rows, views, strict=True):
        row.insert(2, view.kind)
    headers = ["#", "stage", "kind", "request (in → out)", "events (from inside → out)", "options"]
    if inherited or SKELETON_SOURCE in sources:  # which file set each stage
        headers.append("set in")
        for row, view in zip(rows, views, strict=True):
            row.append(spec.stage_sources.get(view.name, spec.source).rsplit("/", 1)[-1])
    if verbose:
        out.table(headers[:5], [r[:5] for r in rows], right=(0,))
        for view in views:
            if view.options:
                out.line()
                out.line(f"{view.index}. {view.name} options:", "bold")
                dumped = yaml.safe_dump(view.options, sort_keys=False, allow_unicode=True)
                for line in dumped.splitlines():
                    out.line(f"  {line}")
    else:
        out.table(headers, rows, right=(0,))


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;")


def mermaid(spec: StackSpec, views: list[StageView]) -> list[str]:
    lines = ["flowchart TB", '    app(["application"])']
    for v in views:
        label = v.name
        if v.options:
            label += "<br/>" + options_text(v.options, 40)
        lines.append(f'    s{v.index}["{_mermaid_text(label)}"]')
    lines.append(f'    api[("{_mermaid_text(endpoint_text(spec))}")]')
    previous = "app"
    for v in views:
        lines.append(f'    {previous} -->|"{_mermaid_text(v.request_in)}"| s{v.index}')
        previous = f"s{v.index}"
    lines.append(f'    {previous} -->|"{_mermaid_text(views[-1].request_out)}"| api')
    lines.append(f'    api -.->|"{_mermaid_text(views[-1].items_in)}"| {previous}')
    for inner, outer in zip(reversed(views), [*reversed(views)][1:], strict=False):
        lines.append(f'    s{inner.index} -.->|"{_mermaid_text(inner.items_out)}"| s{outer.index}')
    lines.append(f'    s{views[0].index} -.->|"{_mermaid_text(views[0].items_out)}"| app')
    return lines
