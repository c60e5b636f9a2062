"""ChatModel: an Adapter and a Router are one, at run time (the Protocol is runtime_checkable)
and to mypy (code typed against ChatModel takes both, and refuses what is not one)."""

from __future__ import annotations

from pathlib import Path

import pytest

import metis
from metis import ChatModel, build_adapter
from metis.routing import Router


def test_an_adapter_and_a_router_are_chat_models() -> None:
    adapter = build_adapter("anthropic", api_key="k")
    router = Router(["anthropic:claude-sonnet-4-5"], adapters={"anthropic": adapter})
    assert isinstance(adapter, ChatModel) and isinstance(router, ChatModel)
    assert not isinstance(object(), ChatModel)
    assert metis.ChatModel is ChatModel and "ChatModel" in metis.__all__


SNIPPET = """
from metis import ChatModel, build_adapter
from metis.routing import Router


def serve(model: ChatModel) -> None: ...


class OnlyCompletes:
    async def complete(self, request: object) -> None: ...


serve(build_adapter("anthropic", api_key="k"))
serve(Router(["anthropic:claude-sonnet-4-5"]))
serve(OnlyCompletes())  # line 15: not a ChatModel
"""


@pytest.mark.slow
def test_mypy_takes_both_as_chat_models_and_refuses_what_is_not_one(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api")
    source = tmp_path / "uses_chat_model.py"
    source.write_text(SNIPPET)
    out, err, status = api.run([str(source), "--strict", "--no-error-summary"])
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert status == 1, (out, err)
    assert len(errors) == 1 and f"{source.name}:15:" in errors[0], out
