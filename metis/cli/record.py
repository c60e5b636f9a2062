"""``metis record``: one call, recorded as a cassette that ``metis replay`` and the tests read.

The exchange goes through :class:`~metis.testing.cassette.RecordingTransport` around a real
``httpx.AsyncHTTPTransport``; the key is scrubbed from the headers, the URL and the bodies
(decoded, across chunks, in escaped forms), and the written file is checked for it as well.
With ``--emulator`` the call goes to an in-process emulator instead (no key needed), which is
how the command is tested offline.
"""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime
from pathlib import Path

import anyio
import httpx

from metis.adapter.adapter import build_adapter
from metis.cli.conversation import WEATHER
from metis.cli.output import CliError, Output
from metis.cli.replay import line
from metis.errors import redact
from metis.model.content import Message
from metis.model.request import CanonicalRequest
from metis.pipeline.config import AdapterConfig
from metis.pipeline.stores import InMemoryToolIdStore
from metis.stacks.loader import StackSpec, load_stack
from metis.testing.cassette import RecordingTransport

PLACEHOLDER_KEY = "metis-emulator-key"


def run(args: argparse.Namespace) -> int:
    spec = load_stack(args.provider)
    output = Path(args.output)
    if not output.parent.is_dir():
        raise CliError(f"cannot write {output}: no directory {output.parent}")
    if args.emulator:  # a placeholder key: a real one has no business there
        from metis.testing.emulator import Emulator

        with Emulator(port=0) as emulator:
            return anyio.run(_record, args, spec, PLACEHOLDER_KEY, emulator.url)
    env = spec.auth.env
    key = os.environ.get(env) if env else None
    if not key and not spec.auth.optional and (env or spec.auth.header):
        raise CliError(
            f"recording from {spec.name} needs its key in {env or 'the environment'} (it is "
            "scrubbed from the cassette); --emulator records against the local emulator"
        )
    return anyio.run(_record, args, spec, key, None)


async def _record(
    args: argparse.Namespace, spec: StackSpec, key: str | None, emulator_url: str | None
) -> int:
    out = Output()
    stream = not args.no_stream
    source = f"the metis emulator ({emulator_url})" if emulator_url else spec.endpoint.base_url
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    recorder = RecordingTransport(
        httpx.AsyncHTTPTransport(),
        name=f"{spec.name}_{Path(args.output).stem}",
        notes=f"Recorded by `metis record` from {source} on {when}; keys scrubbed.",
        secrets=[key],
    )
    wire = args.model.removeprefix(f"{spec.name}:")
    capabilities: dict[str, bool] = {"supports_streaming": stream}
    if args.tool:
        capabilities["supports_tools"] = True
    timeout = httpx.Timeout(600, connect=10)
    async with httpx.AsyncClient(transport=recorder, timeout=timeout) as client:
        adapter = build_adapter(
            spec,
            AdapterConfig(
                api_key=key,
                base_url=emulator_url,
                max_retries=0,  # one exchange: a failure is recorded, not retried
                http_client=client,
                capabilities=capabilities,
            ),
            tool_id_store=InMemoryToolIdStore(),
        )
        request = CanonicalRequest(
            model=f"{spec.name}:{wire}",
            system_prompt=args.system,
            messages=[Message.user(args.prompt)],
            tools=[WEATHER] if args.tool else [],
            max_output_tokens=min(args.max_tokens, adapter.capabilities.max_output_tokens),
        )
        try:
            async for event in adapter.stream(request):
                out.line(line(event))
        finally:
            cassette = recorder.cassette()
            if cassette.interactions:
                _write(cassette.model_dump(exclude_none=True), Path(args.output), key)
                count = len(cassette.interactions)
                out.line(f"wrote {args.output}: {count} interaction(s), keys scrubbed", "dim")
    return 0


def _write(data: object, path: Path, key: str | None) -> None:
    import yaml

    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    if key:  # the recorder scrubbed the bodies; this is the last check, on the file's text
        text = redact(text, key)
    path.write_text(text, encoding="utf-8")
