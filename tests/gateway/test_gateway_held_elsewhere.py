"""A Responses request naming content another server holds (a ``conversation`` of the
Conversations API, a stored ``prompt`` template) is refused when it is translated, as a
``previous_response_id`` the gateway does not hold is: left out, the model answered as if the
conversation or the template's instructions were not there, with only a header to say so. A
passed-through request goes to the server that holds them."""

from __future__ import annotations

from typing import Any

import pytest

from metis.testing.emulator import Emulator

from ..helpers import ImportOnUse

openai = ImportOnUse("openai")


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"conversation": "conv_123"}, "conversation: this gateway holds no conversations"),
        ({"prompt": {"id": "pmpt_123"}}, "prompt: a prompt template is held by OpenAI"),
    ],
)
def test_content_held_elsewhere_is_refused_translated_and_sent_on_passed_through(
    oai: Any, emulator: Emulator, given: dict[str, Any], said: str
) -> None:
    served = len(emulator.requests)
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model="flash", input="Hi", extra_body=given)
    assert said in str(refused.value) and len(emulator.requests) == served
    oai.responses.create(model="gpt5", input="Hi", extra_body=given)
    assert {k: emulator.bodies("openai_responses")[-1][k] for k in given} == given
