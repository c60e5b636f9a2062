"""The history record: found again for the same messages only, never for an edited, added,
removed, reordered or changed-in-place one; what a step keeps on it follows the same rule."""

from __future__ import annotations

import gc
import threading

import pytest

import metis.model.history as history_module
from metis.catalog.estimate import estimate_input_tokens
from metis.errors import InvalidRequestError
from metis.model import (
    CanonicalRequest,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.model.content import URLImageSource
from metis.model.history import _BY_LIST, _BY_MESSAGES, LIMIT, History, history_of
from metis.stages.policy.tool_result_check import ToolResultCheck
from tests.helpers import collector_off_alone, make_call, metis_objects_in_cycles


def _conversation() -> list[Message]:
    return [
        Message.user("what is the weather?"),
        Message(
            role="assistant",
            content=[ToolUseBlock(id="call_1", name="weather", input={"city": "Oslo"})],
        ),
        Message(role="tool", content=[ToolResultBlock(tool_use_id="call_1", content="sunny")]),
        Message.assistant("It is sunny."),
        Message.user("and tomorrow?"),
    ]


def test_the_same_messages_find_the_same_record_in_a_new_list() -> None:
    messages = _conversation()
    record = history_of(messages)
    assert history_of(messages) is record
    assert history_of(list(messages)) is record  # the next call's request: a new list
    assert record.tools_at == (1, 2) and record.tool_ids == {"call_1"}
    assert record.assistant and not record.system and not record.media_at


@pytest.mark.parametrize("edit", ["replaced", "appended", "removed", "reordered", "in_place"])
def test_an_edited_history_never_finds_the_old_record(edit: str) -> None:
    messages = _conversation()
    record = history_of(messages)
    image = ImageBlock(source=URLImageSource(url="https://example.com/a.png"))
    if edit == "replaced":
        messages[4] = messages[4].model_copy(update={"content": [TextBlock(text="x"), image]})
    elif edit == "appended":
        messages.append(Message(role="user", content=[image]))
    elif edit == "removed":
        del messages[1:3]
    elif edit == "reordered":
        messages[0], messages[4] = messages[4], messages[0]
    else:
        messages[4].content.append(image)  # the same message object, its list changed
    again = history_of(messages)
    assert again is not record
    assert again.facts == History(messages, [_facts(m) for m in messages]).facts
    if edit != "removed" and edit != "reordered":
        assert again.images == (image,) and again.media_at == (len(messages) - 1,)
    if edit == "removed":
        assert again.tools_at == ()


def _facts(message: Message) -> object:
    from metis.model.facts import _read

    return _read(message)


def test_a_value_kept_on_a_record_is_not_found_for_a_changed_history() -> None:
    messages = _conversation()
    before = estimate_input_tokens(messages, [], None)
    messages[4].content.append(TextBlock(text="a much longer question " * 50))
    after = estimate_input_tokens(messages, [], None)
    assert after > before
    messages[0] = Message.user("x")
    assert estimate_input_tokens(messages, [], None) < after


def test_a_paired_verdict_is_not_found_once_a_result_is_orphaned_in_place() -> None:
    stage = ToolResultCheck()
    messages = _conversation()
    request = CanonicalRequest(model="m", messages=messages, max_output_tokens=10)
    assert stage.rewrite(request, make_call()) is request  # paired: kept on its record
    assert stage.rewrite(request, make_call()) is request
    # the same request object, an orphan result appended to a kept message's own list
    request.messages[4].content.append(ToolResultBlock(tool_use_id="call_9", content="?"))
    with pytest.raises(InvalidRequestError, match="call_9"):
        stage.rewrite(request, make_call())


def test_a_new_message_at_a_dead_ones_address_finds_no_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Records are keyed on the messages' ids: a message made where a dead one lived has its
    key. Here the dead one's record is left in place (not dropped on death) and the new
    message is given the dead one's id, so only the identity check stands between it and
    the dead one's record."""
    monkeypatch.setattr(history_module, "_forgetting", lambda ids, lists: lambda ref: None)
    content = [TextBlock(text="hello")]
    message = Message(role="user", content=content)
    address = id(message)
    assert not history_of([message]).assistant
    del message
    gc.collect()
    other = Message.model_construct(role="assistant", content=content)
    real_id = id
    monkeypatch.setattr(
        history_module, "id", lambda obj: address if obj is other else real_id(obj), raising=False
    )
    assert (address,) in _BY_MESSAGES  # the dead message's record is still at its address
    assert history_of([other]).assistant  # not the dead user message's record
    history_module.clear()  # records made with no drop on death


def test_a_record_goes_with_its_messages_and_holds_no_cycle() -> None:
    messages = _conversation()
    history_of(messages)
    ids = tuple(map(id, messages))
    with collector_off_alone():
        del messages
        assert ids not in _BY_MESSAGES
        assert metis_objects_in_cycles() == []


def test_the_records_kept_are_bounded() -> None:
    histories = [[Message.user(str(i))] for i in range(LIMIT + 50)]
    for history in histories:
        history_of(history)
    assert len(_BY_MESSAGES) <= LIMIT and len(_BY_LIST) <= LIMIT


def test_threads_reading_histories_each_get_their_own() -> None:
    conversations = [[Message.user(f"q{i}"), Message.assistant(f"a{i}")] for i in range(40)]
    wrong: list[int] = []

    def read(offset: int) -> None:
        for round_ in range(200):
            i = (offset + round_) % len(conversations)
            record = history_of(list(conversations[i]))
            if not record.describes(conversations[i]):
                wrong.append(i)

    threads = [threading.Thread(target=read, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def test_media_fitted_for_one_model_is_fitted_again_for_another() -> None:
    from metis.model.capabilities import AdapterCapabilities
    from metis.model.media_fit import fit_media

    image = ImageBlock(source=URLImageSource(url="https://example.com/a.png"))
    messages = [Message(role="user", content=[TextBlock(text="see"), image]), *_conversation()]
    request = CanonicalRequest(model="m", messages=messages, max_output_tokens=10)
    seeing = AdapterCapabilities(supports_images=True)
    dropped: list[str] = []
    for _ in range(2):
        assert fit_media(request, seeing, "anthropic", lambda *a: dropped.append(a[0])) == (
            request,
            [],
        )
    blind = AdapterCapabilities(supports_images=False)
    fitted, _ = fit_media(request, blind, "anthropic", lambda *a: dropped.append(a[0]))
    assert dropped == ["image"] and fitted.messages[0].content == [TextBlock(text="see")]


def test_a_call_looks_a_list_up_once_and_another_list_anew() -> None:
    call = make_call()
    messages = _conversation()
    record = call.history(messages)
    assert call.history(messages) is record
    shorter = messages[:2]
    assert call.history(shorter).tools_at == (1,)
    assert call.history(messages) is record  # found again by its messages


def test_nothing_is_kept_on_a_record_whose_message_changed_in_place() -> None:
    messages = _conversation()
    record = history_of(messages)
    messages[0].content.append(TextBlock(text="added"))
    record.keep("derived", "from what the messages hold now")
    assert record.found("derived") is None
    assert history_of(messages) is not record


def test_a_record_forgotten_at_interpreter_exit_raises_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    messages = [Message.user("exit")]
    history_of(messages)
    ids = tuple(map(id, messages))
    assert ids in _BY_MESSAGES
    # At exit a module's names may be gone before the last messages are freed.
    monkeypatch.setattr(history_module, "_BY_MESSAGES", None)
    monkeypatch.setattr(history_module, "_BY_LIST", None)
    monkeypatch.setattr(history_module, "suppress", None)
    del messages
    gc.collect()
    assert ids not in _BY_MESSAGES
