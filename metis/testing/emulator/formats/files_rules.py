"""What Gemini and Bedrock Converse refuse of the files in a request: documents, audio and
video, by URL, inline or by file id (a file id another provider issued, a document over the size
limit, a document type or name the API does not take). Anthropic's are the library's rule
(metis/wire/media_rules.py, run by the client's ``pre_send_check`` too); OpenAI's (Chat
Completions' and Responses') are rows of ``tables/chat.yaml`` and ``tables/responses.yaml``.

Each API's check is a rule of its table (:data:`metis.testing.emulator.rules.Check`): it raises
the first refusal, as the API words it. File ids: this emulator "issued" every well-formed id
of its own provider (Anthropic ``file_...``, Gemini ``files/...``, S3 URIs on Bedrock) and no
other."""

from __future__ import annotations

import re
from typing import Any

from metis.testing.emulator.rules import Refused, first
from metis.wire.bedrock_converse.media import message_files
from metis.wire.media_rules import gemini_media

_GEMINI_FILE = re.compile(
    r"^(?:files/|https://generativelanguage\.googleapis\.com/v1(?:beta)?/files/)[a-z0-9-]+$"
)


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# Gemini --------------------------------------------------------------------------------------


def gemini(body: dict[str, Any], call: Any = None) -> None:
    """The library's rule (metis/wire/media_rules.py), with the model asked and the file URIs
    this emulator issued."""
    model = call.model if call is not None else ""
    first(lambda body: gemini_media(body, model, _gemini_uri))(body, call)


def _gemini_uri(uri: Any) -> bool:
    if not isinstance(uri, str):
        return False
    return bool(_GEMINI_FILE.match(uri)) or uri.startswith(("https://", "http://", "gs://"))


# Bedrock Converse ----------------------------------------------------------------------------


def converse(body: dict[str, Any], call: Any = None) -> None:
    """The library's rule (metis/wire/bedrock_converse/media.py), message by message."""
    messages = body.get("messages")
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        blocks = [b for b in _obj(message).get("content") or [] if isinstance(b, dict)]
        for refusal in message_files(i, _obj(message).get("role"), blocks):
            raise Refused(*refusal)
