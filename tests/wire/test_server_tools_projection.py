"""Another provider's search, projected to text (docs/contract.md §11), reads as its own
paragraph: on a wire that joins an assistant's text blocks into one string (Chat Completions)
it does not run into the model's answer, and a result with no title shows its URL once."""

from __future__ import annotations

from metis.model import CanonicalRequest, Message, ServerToolCallBlock, ServerToolResultBlock
from metis.model.content import ProviderRaw
from metis.model.server_tools import SearchResult
from metis.wire.openai_chat import codec
from tests.helpers import recording_call

ORIGIN = ProviderRaw(provider="openai_responses", model="openai_responses:gpt-4o", data={})
CALL = ServerToolCallBlock(
    id="ws_1", name="web_search", input={"query": "python"}, provider_raw=ORIGIN
)
FOUND = ServerToolResultBlock(
    tool_call_id="ws_1",
    name="web_search",
    search_results=[SearchResult(url="https://docs.python.org/3/")],
    provider_raw=ORIGIN,
)


def test_a_projected_search_is_a_paragraph_of_its_own_on_chat() -> None:
    history = [
        Message.user("Latest Python?"),
        Message.assistant(CALL, FOUND, "Python 3.14 is out."),
        Message.user("Thanks"),
    ]
    request = CanonicalRequest(model="openai:gpt-4o", messages=history, max_output_tokens=64)
    body = codec.encode(request, recording_call("openai", "openai:gpt-4o"))
    assert body["messages"][1]["content"] == (
        '[web_search {"query": "python"}]\n- <https://docs.python.org/3/>\n\nPython 3.14 is out.'
    )
