"""``ImageBlock``'s constructors, as the file blocks have them: from a path, bytes or a URL."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

import metis
from metis.model.content import Base64ImageSource, URLImageSource

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


def test_an_image_from_a_path_is_inline_with_its_type_from_the_name(tmp_path: Path) -> None:
    path = tmp_path / "chart.png"
    path.write_bytes(PNG)
    block = metis.ImageBlock.from_path(path)
    assert block.source == Base64ImageSource(
        media_type="image/png", data=base64.b64encode(PNG).decode()
    )
    assert metis.ImageBlock.from_path(str(path), "image/webp").source.media_type == "image/webp"


def test_a_file_that_is_not_an_image_by_its_name_is_refused_saying_what_to_use(
    tmp_path: Path,
) -> None:
    (tmp_path / "report.pdf").write_bytes(b"%PDF-1.7")
    with pytest.raises(ValueError, match=r"report\.pdf: not an image.*DocumentBlock"):
        metis.ImageBlock.from_path(tmp_path / "report.pdf")
    (tmp_path / "blob").write_bytes(PNG)
    with pytest.raises(ValueError, match="unknown type"):
        metis.ImageBlock.from_path(tmp_path / "blob")


def test_an_image_from_bytes_or_a_url_goes_in_a_message() -> None:
    inline = metis.ImageBlock.from_bytes(PNG, "image/png")
    linked = metis.ImageBlock.from_url("https://example.com/cat.jpg")
    assert linked.source == URLImageSource(url="https://example.com/cat.jpg")
    message = metis.Message.user("What are these?", inline, linked)
    assert [b.type for b in message.content] == ["text", "image", "image"]


def test_what_is_no_block_in_a_message_is_said_with_what_would_do(tmp_path: Path) -> None:
    """pydantic's "Input should be a valid dictionary or object" named neither the item nor the
    block that was meant."""
    with pytest.raises(TypeError, match=r"content\[1\] is bytes.*ImageBlock\.from_bytes"):
        metis.Message.user("What is this?", PNG)
    with pytest.raises(TypeError, match=r"content\[0\] is PosixPath.*from_path"):
        metis.Message.assistant(tmp_path / "a.png")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"content\[1\] is int.*give a str, or a block"):
        metis.Message.user("x", 3)  # type: ignore[arg-type]
    as_dict = metis.Message.user("x", {"type": "text", "text": "y"})  # type: ignore[arg-type]
    assert [b.type for b in as_dict.content] == ["text", "text"]


def test_what_is_no_tool_result_in_a_tool_message_is_said_with_what_would_do() -> None:
    """``Message.tool("18 C")`` was pydantic's "Input should be a valid dictionary"."""
    with pytest.raises(TypeError, match=r"results\[0\] is str, not a ToolResultBlock.*tool_use_id"):
        metis.Message.tool("18 C")  # type: ignore[arg-type]
    answer = metis.ToolResultBlock(tool_use_id="tu_1", content="18 C")
    assert metis.Message.tool(answer).content == [answer]


def test_from_url_of_a_local_path_says_from_path_is_meant() -> None:
    """``DocumentBlock.from_url("report.pdf")`` was taken, and the provider refused (or
    fetched nothing from) a URL without a scheme."""
    with pytest.raises(ValueError, match=r"from_url\('report.pdf'\): not a URL.*from_path"):
        metis.DocumentBlock.from_url("report.pdf")
    with pytest.raises(ValueError, match=r"ImageBlock.from_path\(path\)"):
        metis.ImageBlock.from_url("chart.png")
    for url in ("https://example.com/a.png", "data:image/png;base64,AAAA", "gs://b/a.png"):
        assert metis.ImageBlock.from_url(url).source.url == url  # type: ignore[union-attr]
    assert metis.DocumentBlock.from_url("s3://bucket/report.pdf").source.url
