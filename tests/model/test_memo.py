"""MessageMemo: a value kept for one message object, never for an edited or other one; the
message facts and token counts kept in one."""

from __future__ import annotations

import gc

import pytest

import metis.model.memo as memo_module
from metis.catalog.estimate import estimate_input_tokens
from metis.catalog.token_profile import TokenProfile
from metis.model import ImageBlock, Message, TextBlock, ToolUseBlock
from metis.model.content import URLImageSource
from metis.model.facts import facts_of
from metis.model.memo import MessageMemo


def test_a_value_is_found_for_the_same_message_and_key_only() -> None:
    memo: MessageMemo[str] = MessageMemo()
    message = Message.user("hello")
    memo.put(message, "a", "kept")
    assert memo.get(message, "a") == "kept"
    assert memo.get(message, "b") is None
    assert memo.get(Message.user("hello"), "a") is None  # equal, but another object


def test_an_edited_copy_of_a_message_finds_nothing() -> None:
    memo: MessageMemo[str] = MessageMemo()
    message = Message.user("hello")
    memo.put(message, None, "kept")
    assert memo.get(message.model_copy(), None) is None
    assert memo.get(message.model_copy(update={"content": [TextBlock(text="bye")]}), None) is None


def test_a_content_list_changed_in_place_finds_nothing() -> None:
    memo: MessageMemo[str] = MessageMemo()
    message = Message.user("hello", "there")
    memo.put(message, None, "kept")
    message.content[1] = TextBlock(text="else")
    assert memo.get(message, None) is None
    memo.put(message, None, "again")
    message.content.append(TextBlock(text="more"))
    assert memo.get(message, None) is None


def test_a_new_message_at_a_dead_ones_address_finds_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The memo keys on ``id(message)``: a message made where a dead one lived has its key.
    Here its entry is left in place (not dropped on death) and the new message is given the
    dead one's id, so only the identity check stands between it and the dead one's value."""
    monkeypatch.setattr(memo_module, "forgetting", lambda entries, at: lambda ref: None)
    memo: MessageMemo[str] = MessageMemo()
    content = [TextBlock(text="hello")]
    message = Message(role="user", content=content)
    address = id(message)
    memo.put(message, None, "kept")
    memo.put(message, "key", "kept")
    del message
    gc.collect()
    other = Message.model_construct(role="user", content=content)  # the same blocks
    real_id = id
    monkeypatch.setattr(
        memo_module, "id", lambda obj: address if obj is other else real_id(obj), raising=False
    )
    assert len(memo) == 2  # the dead message's entries are still at its address
    assert memo.get(other, None) is None
    assert memo.get(other, "key") is None
    assert memo.get_or_make(other, None, lambda: "new") == "new"


def test_the_memo_keeps_at_most_its_limit_oldest_first_out() -> None:
    memo: MessageMemo[int] = MessageMemo(limit=2)
    messages = [Message.user(str(i)) for i in range(3)]
    for i, message in enumerate(messages):
        memo.put(message, None, i)
    assert len(memo) == 2
    assert memo.get(messages[0], None) is None
    assert memo.get_or_make(messages[2], None, lambda: -1) == 2
    assert memo.get_or_make(messages[0], None, lambda: -1) == -1


def test_a_messages_facts_follow_its_edits() -> None:
    use = ToolUseBlock(id="tu_1", name="f", input={})
    message = Message.assistant(use)
    assert facts_of(message).tool_ids == ("tu_1",)
    renamed = message.model_copy(update={"content": [use.model_copy(update={"id": "tu_2"})]})
    assert facts_of(renamed).tool_ids == ("tu_2",)
    image = ImageBlock(source=URLImageSource(url="https://example.com/a.png"))
    message.content.append(image)
    facts = facts_of(message)
    assert facts.images == (image,) and facts.media
    assert not facts_of(Message.user("hi")).media


def test_a_messages_token_count_follows_its_edits_and_the_profile() -> None:
    message = Message.user("a" * 400)
    chars, pieces = TokenProfile(), TokenProfile(text_counting="pieces", word_chars=10)
    assert estimate_input_tokens([message], [], None, chars) == 104  # 400 / 4 + 4 framing
    assert estimate_input_tokens([message], [], None, pieces) == 44  # 40 pieces + 4
    longer = message.model_copy(update={"content": [TextBlock(text="a" * 800)]})
    assert estimate_input_tokens([longer], [], None, chars) == 204
    message.content[0] = TextBlock(text="a" * 40)
    assert estimate_input_tokens([message], [], None, chars) == 14


def test_an_entry_goes_with_its_message() -> None:
    memo: MessageMemo[str] = MessageMemo()
    kept, gone = Message.user("kept"), Message.user("gone")
    memo.put(kept, None, "a")
    memo.put(gone, "key", "b")
    del gone
    gc.collect()
    assert len(memo) == 1 and memo.get(kept, None) == "a"
