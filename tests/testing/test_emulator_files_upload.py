"""Files API uploads on the emulator (docs/emulator.md): Anthropic's ``POST /v1/files`` (an
``anthropic-version`` header) answers Anthropic's file object, whose ``file_...`` id a
Messages request then reads a document by; OpenAI's, at the same path, keeps the file's name
and purpose as given."""

from __future__ import annotations

import pytest

import metis
from metis.testing.emulator import Emulator

pytestmark = pytest.mark.anyio

PDF = b"%PDF-1.4\n%%EOF\n"
ANTHROPIC = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
ANTHROPIC_FILES = {**ANTHROPIC, "anthropic-beta": "files-api-2025-04-14"}


async def test_an_anthropic_upload_is_a_file_id_the_messages_api_reads() -> None:
    emulator = Emulator()
    async with emulator.client() as client:
        files = {"file": ("letter.pdf", PDF, "application/pdf")}
        answer = await client.post(
            "https://api.anthropic.com/v1/files", files=files, headers=ANTHROPIC_FILES
        )
        uploaded = answer.json()
        assert answer.status_code == 200
        assert uploaded["id"].startswith("file_") and uploaded["type"] == "file"
        assert (uploaded["filename"], uploaded["mime_type"]) == ("letter.pdf", "application/pdf")
        assert uploaded["size_bytes"] == len(PDF)
        document = metis.DocumentBlock.from_file_id(uploaded["id"], provider="anthropic")
        async with metis.build_adapter("anthropic", api_key="k", http_client=client) as adapter:
            reply = await adapter.complete(
                metis.CanonicalRequest(
                    model="anthropic:claude-sonnet-4-5",
                    messages=[metis.Message.user("Summarise it.", document)],
                    max_output_tokens=64,
                )
            )
    assert reply.text == "You said: Summarise it."
    sent = emulator.bodies("anthropic")[-1]["messages"][0]["content"][1]
    assert sent["source"] == {"type": "file", "file_id": uploaded["id"]}


async def test_an_openai_upload_keeps_its_name_and_purpose() -> None:
    emulator = Emulator()
    async with emulator.client() as client:
        files = {"file": ("letter.pdf", PDF, "application/pdf")}
        answer = await client.post(
            "https://api.openai.com/v1/files",
            files=files,
            data={"purpose": "user_data"},
            headers={"authorization": "Bearer k"},
        )
        no_purpose = await client.post(
            "https://api.openai.com/v1/files", files=files, headers={"authorization": "Bearer k"}
        )
    uploaded = answer.json()
    assert uploaded["id"].startswith("file-")
    assert (uploaded["filename"], uploaded["purpose"], uploaded["bytes"]) == (
        "letter.pdf",
        "user_data",
        len(PDF),
    )
    assert no_purpose.status_code == 400
    assert no_purpose.json()["error"]["param"] == "purpose"


async def test_a_gemini_resumable_upload_is_a_file_a_request_names() -> None:
    """As google-genai's ``client.files.upload`` sends it: a start with the metadata (in
    either JSON spelling), the bytes in chunks to the URL it answers, the last finalizing."""
    emulator = Emulator()
    start = {
        "x-goog-api-key": "k",
        "x-goog-upload-protocol": "resumable",
        "x-goog-upload-command": "start",
        "x-goog-upload-header-content-type": "application/pdf",
    }
    metadata = {"file": {"display_name": "Letter"}}
    root = "https://generativelanguage.googleapis.com"
    async with emulator.client() as client:
        begun = await client.post(f"{root}/upload/v1beta/files", json=metadata, headers=start)
        url = begun.headers["x-goog-upload-url"]
        assert begun.headers["x-goog-upload-status"] == "active"
        first = await client.post(url, content=PDF[:5], headers={"x-goog-upload-command": "upload"})
        assert first.headers["x-goog-upload-status"] == "active"
        last = {"x-goog-upload-command": "upload, finalize"}
        done = await client.post(url, content=PDF[5:], headers=last)
        assert done.headers["x-goog-upload-status"] == "final"
        uploaded = done.json()["file"]
        unknown = await client.post(f"{root}/upload/v1beta/files?upload_id=nope", headers=last)
        document = metis.DocumentBlock.from_file_id(uploaded["uri"], provider="gemini")
        async with metis.build_adapter("gemini", api_key="k", http_client=client) as adapter:
            reply = await adapter.complete(
                metis.CanonicalRequest(
                    model="gemini:gemini-2.5-flash",
                    messages=[metis.Message.user("Summarise it.", document)],
                    max_output_tokens=64,
                )
            )
    assert uploaded["name"].startswith("files/") and uploaded["state"] == "ACTIVE"
    assert uploaded["uri"] == f"{root}/v1beta/{uploaded['name']}"
    assert (uploaded["displayName"], uploaded["mimeType"]) == ("Letter", "application/pdf")
    assert uploaded["sizeBytes"] == str(len(PDF))
    assert unknown.status_code == 404
    assert reply.text == "You said: Summarise it."
    assert emulator.bodies("gemini")[-1]["contents"][0]["parts"][1] == {
        "fileData": {"fileUri": uploaded["uri"]}
    }  # the chunks, a file's bytes, are no JSON bodies
