"""The default run's one message per test from an xdist worker (tests/xdist_batch.py)."""

from __future__ import annotations

import threading
from typing import Any

from ..xdist_batch import BATCH, HeldEvents, unpacking


def test_a_tests_events_leave_together_when_it_ends_and_arrive_in_their_order() -> None:
    sent: list[tuple[str, dict[str, Any]]] = []
    send = HeldEvents(lambda name, **kwargs: sent.append((name, kwargs)))
    send("collectionfinish", ids=["t1", "t2"])
    for name in ("logstart", "testreport", "testreport", "warning_recorded", "testreport"):
        send(name, nodeid="t1")
    assert [name for name, _ in sent] == ["collectionfinish"]
    send("logfinish", nodeid="t1")
    send("runtest_protocol_complete", item_index=0, duration=0.1)
    assert [name for name, _ in sent] == ["collectionfinish", BATCH]

    received: list[tuple[str, dict[str, Any]]] = []
    process = unpacking(lambda controller, eventcall: received.append(eventcall))
    for name, kwargs in sent:
        process(None, (name, kwargs))
    assert [name for name, _ in received] == [
        "collectionfinish",
        "logstart",
        "testreport",
        "testreport",
        "warning_recorded",
        "testreport",
        "logfinish",
        "runtest_protocol_complete",
    ]
    assert received[-1][1] == {"item_index": 0, "duration": 0.1}


def test_an_event_about_no_test_goes_at_once_after_what_is_held() -> None:
    sent: list[str] = []
    send = HeldEvents(lambda name, **kwargs: sent.append(name))
    send("logstart", nodeid="t1")
    send("workerfinished", workeroutput={})
    assert sent == ["logstart", "workerfinished"]
    send("runtest_protocol_complete", item_index=0, duration=0.1)  # alone: sent as itself
    assert sent[-1] == "runtest_protocol_complete"


def test_stolen_work_answered_from_another_thread_keeps_the_held_events_whole() -> None:
    sent: list[str] = []
    send = HeldEvents(lambda name, **kwargs: sent.append(name))
    send("logstart", nodeid="t1")
    other = threading.Thread(target=send, args=("unscheduled",), kwargs={"indices": [3]})
    other.start()
    other.join()
    send("runtest_protocol_complete", item_index=0, duration=0.1)
    assert sent == ["logstart", "unscheduled", "runtest_protocol_complete"]


def test_events_that_are_not_batches_pass_through_as_they_came() -> None:
    received: list[Any] = []
    process = unpacking(lambda controller, eventcall: received.append(eventcall))
    end = object()
    process(None, ("testreport", {"data": {}}))
    process(None, end)
    assert received == [("testreport", {"data": {}}), end]
