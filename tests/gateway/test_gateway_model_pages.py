"""The model list's pages as Anthropic's ``GET /v1/models`` gives them, and its refusals."""

from __future__ import annotations

import pytest

from metis.errors import InvalidRequestError
from metis.gateway.models import listed_page

LISTED = [{"id": name, "type": "model"} for name in ("a", "b", "c", "d", "e")]


def test_a_page_goes_after_or_before_its_cursor() -> None:
    first = listed_page(LISTED, {"limit": "2"})
    assert [m["id"] for m in first["data"]] == ["a", "b"] and first["has_more"]
    assert (first["first_id"], first["last_id"]) == ("a", "b")
    after = listed_page(LISTED, {"limit": "2", "after_id": "c"})
    assert [m["id"] for m in after["data"]] == ["d", "e"] and not after["has_more"]
    before = listed_page(LISTED, {"limit": "2", "before_id": "c"})
    assert [m["id"] for m in before["data"]] == ["a", "b"] and not before["has_more"]
    assert listed_page(LISTED, None)["data"] == LISTED  # OpenAI's list: whole


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ({"limit": "0"}, "limit: expected an integer from 1 to 1000, got '0'"),
        ({"limit": "ten"}, "limit: expected an integer from 1 to 1000, got 'ten'"),
        ({"after_id": "a", "before_id": "c"}, "after_id, before_id: give one of them, not both"),
        ({"before_id": "z"}, "before_id: no model 'z' in the list"),
    ],
)
def test_a_page_asked_wrongly_is_refused_saying_why(query: dict[str, str], said: str) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        listed_page(LISTED, query)
    assert said in str(refused.value)
