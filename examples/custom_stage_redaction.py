"""A request-side stage: mask e-mail addresses in user text before the request leaves.

    python examples/custom_stage_redaction.py

A stage that only rewrites the request subclasses RequestStage and implements rewrite(); it
costs nothing per streamed event. Inserted after capability_check, it runs before the
request is encoded for the provider, so no codec ever sees an address. Talks to Anthropic
when ANTHROPIC_API_KEY is set; otherwise to the local emulator, whose record of what it
received shows that no address went over the wire.
"""

from __future__ import annotations

import re

import anyio

from metis import CanonicalRequest, Message, TextBlock
from metis.pipeline import Call, RequestStage
from metis.testing import MODELS, stand_in

EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


class RedactEmails(RequestStage[CanonicalRequest]):
    name = "redact_emails"

    def rewrite(self, request: CanonicalRequest, call: Call) -> CanonicalRequest:
        messages = [
            message.model_copy(
                update={
                    "content": [
                        b.model_copy(update={"text": EMAIL.sub("[email]", b.text)})
                        if isinstance(b, TextBlock)
                        else b
                        for b in message.content
                    ]
                }
            )
            if message.role == "user"
            else message
            for message in request.messages
        ]
        return request.model_copy(update={"messages": messages})  # never mutate the request


async def main() -> None:
    with stand_in("anthropic") as setup:
        async with setup.adapter("anthropic") as adapter:
            adapter.pipeline.insert_after("capability_check", RedactEmails())
            print(" -> ".join(adapter.pipeline.names()))
            request = CanonicalRequest(
                model=MODELS["anthropic"],
                messages=[Message.user("Draft a reply to jane.doe@example.com about the invoice.")],
                max_output_tokens=300,
            )
            response = await adapter.complete(request)
        print(f"reply: {response.text}")
        if setup.emulator is not None:
            (sent,) = setup.emulator.requests
            body = sent.body.decode()
            print(f"wire request to {sent.path}: {body}")
            print(f"e-mail addresses on the wire: {EMAIL.findall(body) or 'none'}")


if __name__ == "__main__":
    anyio.run(main)
