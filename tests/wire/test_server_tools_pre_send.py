"""pre_send_check takes back what the provider itself sent (docs/contract.md §11): a Responses
history holding the web search and code interpreter items (after their reasoning), and a
Gemini history holding code execution parts, are not refused as unknown."""

from __future__ import annotations

from metis.wire.rules import gemini_problems, openai_responses_problems

SEARCH = {
    "id": "ws_1",
    "type": "web_search_call",
    "status": "completed",
    "action": {"type": "search", "query": "python"},
}
RUN = {
    "id": "ci_1",
    "type": "code_interpreter_call",
    "status": "completed",
    "code": "print(6 * 7)",
    "container_id": "cntr_1",
    "outputs": [{"type": "logs", "logs": "42\n"}],
}
SAID = {"role": "assistant", "content": [{"type": "output_text", "text": "42."}]}


def test_a_responses_history_with_server_tool_items_has_no_problems() -> None:
    reasoning = {"id": "rs_1", "type": "reasoning", "summary": []}
    items = [{"role": "user", "content": "?"}, reasoning, SEARCH, RUN, SAID]
    assert openai_responses_problems({"input": items}) == []


def test_an_item_of_a_type_the_api_does_not_have_is_still_a_problem() -> None:
    items = [{"role": "user", "content": "?"}, {"type": "made_up_call", "id": "x"}]
    assert openai_responses_problems({"input": items}) == [
        "input[1]: unknown item type 'made_up_call'"
    ]


def test_a_gemini_history_with_code_execution_parts_has_no_problems() -> None:
    model = {
        "role": "model",
        "parts": [
            {"executableCode": {"language": "PYTHON", "code": "print(6 * 7)"}},
            {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "42\n"}},
            {"text": "It is 42."},
        ],
    }
    contents = [{"role": "user", "parts": [{"text": "6 x 7?"}]}, model]
    assert (
        gemini_problems({"contents": [*contents, {"role": "user", "parts": [{"text": "ok"}]}]})
        == []
    )
