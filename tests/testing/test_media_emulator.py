"""File blocks end to end on the emulator, whose rules refuse what each real API refuses
(metis/testing/emulator/formats/files_rules.py): a PDF question on every platform that reads
PDFs, streamed and whole; a conversation carrying a PDF and media in a tool result swapped across
every family, each request accepted and each block a provider cannot take in the warnings, by kind;
and the refusals themselves, on raw requests (a file id from another provider, a document
over the size limit, a name or type the API does not take)."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

import metis
from metis.errors import CapabilityError
from metis.model import (
    Base64ImageSource,
    CanonicalRequest,
    DocumentBlock,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
)
from metis.pipeline.stores import InMemoryToolIdStore
from metis.testing.emulator import Emulator

from .. import stack_table as platforms

pytestmark = [
    pytest.mark.usefixtures("no_backoff"),  # retries are not waited for
    pytest.mark.backend_independent,  # wire formats checked against the emulator
]

PDF = DocumentBlock.from_bytes(b"%PDF-1.7\n1 0 obj\n", "application/pdf", title="Q3 report")
PNG = ImageBlock(source=Base64ImageSource(media_type="image/png", data="iVBORw0KGgo="))
READS_PDFS = [
    "anthropic",
    "bedrock",
    "vertex",
    "openai_responses",
    "bedrock_anthropic",
    "gemini",
    "vertex_anthropic",
    "azure_responses",
    "openai",
]


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("stack", READS_PDFS)
async def test_a_pdf_question_on_every_platform_that_reads_pdfs(
    stack: str, stream: bool, emulator: Emulator
) -> None:
    adapter = platforms.adapter(stack, emulator, InMemoryToolIdStore())
    request = CanonicalRequest(
        model=platforms.MODELS[stack],
        messages=[Message.user("What is in the report?", PDF)],
        max_output_tokens=256,
        stream=stream,
    )
    with anyio.fail_after(20):
        reply = await adapter.complete(request)
    assert reply.text and reply.warnings == []
    (sent,) = emulator.requests
    assert b"JVBERi0xLjcKMSAwIG9iago=" in sent.body  # the PDF went, whole


@pytest.mark.anyio
async def test_a_conversation_with_files_swapped_across_every_family(emulator: Emulator) -> None:
    """A PDF in the first turn, then on every provider a tool call answered with a screenshot
    and a document; every provider takes the history (the emulator refuses what its API would)
    or says, by kind, what it left out."""
    store = InMemoryToolIdStore()
    history = [Message.user("Read the report.", PDF), Message.assistant("Read.")]
    left_out: dict[str, list[str]] = {}
    answered: list[str] = []
    refused: list[str] = []
    with anyio.fail_after(60):
        for stack in platforms.ROTATION:
            adapter = platforms.adapter(stack, emulator, store)
            history.append(Message.user(f"What's the weather in Paris, {stack}?"))
            reply = await adapter.complete(platforms.ask(stack, history))
            history.append(reply.message)
            warned = {w.block_type for w in reply.warnings}
            while reply.tool_calls:
                answered.append(stack)
                for media in ((PNG, PDF), (PNG,), ()):  # what this model reads, in its turn
                    try:
                        reply = await _answer(adapter, stack, history, reply, *media)
                        break
                    except CapabilityError:  # refused before anything was sent
                        refused.append(stack)
                        history.pop()
                warned |= {w.block_type for w in reply.warnings}
            left_out[stack] = sorted(warned)
    assert sorted(set(answered)) == sorted(platforms.ROTATION)  # files in each one's results
    assert sorted(set(refused)) == ["azure", "groq", "ollama"]
    for stack in ("anthropic", "bedrock", "gemini", "vertex", "openai", "openai_responses"):
        assert left_out[stack] == [], stack
    assert left_out["azure"] == ["document"]  # Azure documents no files on Chat Completions
    assert left_out["groq"] == ["document", "image"]  # Llama 3.3 reads neither
    assert "document" in left_out["ollama"]


async def _answer(adapter: Any, stack: str, history: list[Message], reply: Any, *media: Any) -> Any:
    """Answer the reply's tool calls with text and ``media``; the next reply."""
    results = [
        ToolResultBlock(tool_use_id=call.id, content=[TextBlock(text="18 C; scan:"), *media])
        for call in reply.tool_calls
    ]
    history.append(Message.tool(*results))
    answer = await adapter.complete(platforms.ask(stack, history))
    history.append(answer.message)
    return answer


# The emulator's refusals, on raw requests ---------------------------------------------------


async def _post(url: str, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.post(url, json=body, headers=headers)


ANTHROPIC = {"x-api-key": "k", "anthropic-version": "2023-06-01"}


def _anthropic(source: dict[str, Any]) -> dict[str, Any]:
    document = {"type": "document", "source": source}
    content = [{"type": "text", "text": "?"}, document]
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": content}],
    }


@pytest.mark.anyio
async def test_anthropic_refuses_a_foreign_file_id_and_a_request_over_32_mb(
    emulator: Emulator,
) -> None:
    url = emulator.base_url("anthropic") + "/v1/messages"
    ok = await _post(url, _anthropic({"type": "file", "file_id": "file_011CNha8"}), ANTHROPIC)
    assert ok.status_code == 200
    foreign = await _post(url, _anthropic({"type": "file", "file_id": "file-6F2ks"}), ANTHROPIC)
    assert foreign.status_code == 400 and "File not found: file-6F2ks" in foreign.text
    big = {"type": "base64", "media_type": "application/pdf", "data": "A" * (33 * 1024 * 1024)}
    # in process: no socket carries the 33 MB
    async with httpx.AsyncClient(transport=emulator.transport()) as in_process:
        too_large = await in_process.post(url, json=_anthropic(big), headers=ANTHROPIC)
    assert too_large.status_code == 413
    assert too_large.json()["error"]["type"] == "request_too_large"
    text = {"type": "base64", "media_type": "text/plain", "data": "aGk="}
    assert (await _post(url, _anthropic(text), ANTHROPIC)).status_code == 400


@pytest.mark.anyio
async def test_openai_refuses_foreign_file_ids_non_pdf_files_and_other_audio(
    emulator: Emulator,
) -> None:
    url = emulator.base_url("openai") + "/v1/chat/completions"
    auth = {"authorization": "Bearer k"}

    def chat(part: dict[str, Any]) -> dict[str, Any]:
        return {"model": "gpt-4o", "messages": [{"role": "user", "content": [part]}]}

    good = {"type": "file", "file": {"file_id": "file-6F2ksmvXxt4VdoqmHRw6kL"}}
    assert (await _post(url, chat(good), auth)).status_code == 200
    foreign = {"type": "file", "file": {"file_id": "file_011CNha8"}}
    refused = await _post(url, chat(foreign), auth)
    assert refused.status_code == 400 and "No such File object" in refused.text
    text = {
        "type": "file",
        "file": {"filename": "a.txt", "file_data": "data:text/plain;base64,aGk="},
    }
    assert "application/pdf" in (await _post(url, chat(text), auth)).text
    flac = {"type": "input_audio", "input_audio": {"data": "ZkxhQw==", "format": "flac"}}
    assert "'wav' and 'mp3'" in (await _post(url, chat(flac), auth)).text
    responses = emulator.base_url("openai_responses") + "/v1/responses"
    item = {"role": "user", "content": [{"type": "input_file", "file_id": "file_011CNha8"}]}
    body = {"model": "gpt-4o", "input": [item]}
    assert (await _post(responses, body, auth)).status_code == 400


@pytest.mark.anyio
async def test_gemini_refuses_foreign_uris_and_function_response_parts_before_gemini_3(
    emulator: Emulator,
) -> None:
    base = emulator.base_url("gemini") + "/v1beta/models/{}:generateContent"
    auth = {"x-goog-api-key": "k"}

    def ask(*parts: dict[str, Any]) -> dict[str, Any]:
        return {"contents": [{"role": "user", "parts": [{"text": "?"}, *parts]}]}

    files_uri = {"fileData": {"mimeType": "application/pdf", "fileUri": "files/abc123"}}
    assert (await _post(base.format("gemini-2.5-flash"), ask(files_uri), auth)).status_code == 200
    s3 = {"fileData": {"mimeType": "application/pdf", "fileUri": "s3://bucket/a.pdf"}}
    assert (await _post(base.format("gemini-2.5-flash"), ask(s3), auth)).status_code == 400
    call = {
        "functionCall": {"name": "scan", "args": {}},
        "thoughtSignature": "skip_thought_signature_validator",  # Gemini 3: a call not its own
    }
    blob = {"inlineData": {"mimeType": "image/png", "data": "iVBO"}}
    answer = {"functionResponse": {"name": "scan", "response": {"output": "x"}, "parts": [blob]}}
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "scan"}]},
            {"role": "model", "parts": [call]},
            {"role": "user", "parts": [answer]},
        ]
    }
    assert (await _post(base.format("gemini-2.5-flash"), body, auth)).status_code == 400
    assert (await _post(base.format("gemini-3-pro-preview"), body, auth)).status_code == 200


@pytest.mark.anyio
async def test_converse_refuses_bad_document_names_too_many_documents_and_lone_documents(
    emulator: Emulator,
) -> None:
    url = emulator.base_url("bedrock") + "/model/us.amazon.nova-pro-v1:0/converse"
    auth = {"authorization": "Bearer k"}

    def document(name: str) -> dict[str, Any]:
        return {"document": {"format": "pdf", "name": name, "source": {"bytes": "JVBE"}}}

    def converse(*blocks: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [{"role": "user", "content": list(blocks)}]}

    text = {"text": "Summarise."}
    assert (await _post(url, converse(text, document("report")), auth)).status_code == 200
    bad_name = await _post(url, converse(text, document("report.pdf")), auth)
    assert bad_name.status_code == 400 and "document file name" in bad_name.text
    six = [document(f"d{i}") for i in range(6)]
    assert "up to 5 documents" in (await _post(url, converse(text, *six), auth)).text
    assert "text content block" in (await _post(url, converse(document("a")), auth)).text
    audio = {"audio": {"format": "mp3", "source": {"bytes": "SUQz"}}}
    assert (await _post(url, converse(text, audio), auth)).status_code == 200


def test_metis_complete_takes_a_document_as_a_dict(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", emulator.url)
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")
    document = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjcK"},
        "title": "Q3 report",
    }
    messages = [{"role": "user", "content": [{"type": "text", "text": "Summarise."}, document]}]
    reply = metis.complete("gemini:gemini-2.5-flash", messages)
    assert reply.text and reply.warnings == []
    sent = emulator.requests[-1].json()["contents"][0]["parts"]
    assert {"inlineData": {"mimeType": "application/pdf", "data": "JVBERi0xLjcK"}} in sent
    misspelt = [{"role": "user", "content": [{**document, "titel": "x"}]}]
    with pytest.raises(
        metis.InvalidRequestError, match="unknown key 'titel'; did you mean 'title'"
    ):
        metis.complete("gemini:gemini-2.5-flash", misspelt)
