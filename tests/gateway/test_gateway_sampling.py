"""The sampling settings a client gives beside ``temperature`` (``top_p`` in every API,
Anthropic's ``top_k``, Chat's ``seed`` and penalties) reach a model of another family that
takes them, through the official SDKs; a model that does not take one has it left out and
named in ``x-metis-dropped``; a value outside its API's range is the SDK's
``BadRequestError`` naming it. (They were read by no reader and dropped on every translated
path, though the canonical request has each.)"""

from __future__ import annotations

from typing import Any

import pytest

from metis.testing.emulator import Emulator

from ..helpers import ImportOnUse

anthropic = ImportOnUse("anthropic")
openai = ImportOnUse("openai")
SAID: Any = [{"role": "user", "content": "Hi"}]


def test_chat_sampling_reaches_gemini_and_what_claude_lacks_is_named(
    oai: Any, emulator: Emulator
) -> None:
    sampling = {"top_p": 0.5, "seed": 3, "frequency_penalty": 0.1, "presence_penalty": -0.5}
    raw = oai.chat.completions.with_raw_response.create(model="flash", messages=SAID, **sampling)
    assert raw.headers.get("x-metis-dropped") is None
    config = emulator.bodies("gemini")[-1]["generationConfig"]
    assert (config["topP"], config["seed"]) == (0.5, 3)
    assert (config["frequencyPenalty"], config["presencePenalty"]) == (0.1, -0.5)
    raw = oai.chat.completions.with_raw_response.create(model="sonnet", messages=SAID, **sampling)
    sent = emulator.bodies("anthropic")[-1]
    assert sent["top_p"] == 0.5 and "seed" not in sent
    dropped = raw.headers["x-metis-dropped"]
    assert all(name in dropped for name in ("seed", "frequency_penalty", "presence_penalty"))
    assert raw.parse().choices[0].message.content == "You said: Hi"


def test_responses_top_p_is_sent_and_echoed_with_the_metadata(oai: Any, emulator: Emulator) -> None:
    """The response object says the ``top_p`` asked (not the default 1.0), and the client's
    ``metadata`` as it gave it, as OpenAI's does."""
    response = oai.responses.create(model="flash", input="Hi", top_p=0.25, metadata={"team": "a"})
    assert emulator.bodies("gemini")[-1]["generationConfig"]["topP"] == 0.25
    assert response.top_p == 0.25 and response.metadata == {"team": "a"}


def test_messages_top_k_and_top_p_reach_gemini_and_top_k_is_named_for_openai(
    claude: Any, emulator: Emulator
) -> None:
    """The anthropic SDK (1.0 on) sends them as ``extra_body``, as older SDKs and LangChain's
    ``ChatAnthropic`` send them as fields."""
    given = {"top_k": 4, "top_p": 0.5}
    claude.messages.create(model="flash", max_tokens=50, messages=SAID, extra_body=given)
    config = emulator.bodies("gemini")[-1]["generationConfig"]
    assert (config["topK"], config["topP"]) == (4, 0.5)
    with claude.messages.with_streaming_response.create(
        model="gpt", max_tokens=50, messages=SAID, stream=True, extra_body=given
    ) as raw:
        assert "top_k" in raw.headers["x-metis-dropped"]
        assert "top_p" not in raw.headers["x-metis-dropped"]
    sent = emulator.bodies("openai")[-1]
    assert sent["top_p"] == 0.5 and "top_k" not in sent


def test_a_sampling_value_outside_the_models_range_is_left_out_and_named(
    oai: Any, emulator: Emulator
) -> None:
    """A value the routed model takes only in a narrower range than the caller's API (Claude's
    temperature is 0 to 1, OpenAI's 0 to 2), or not at all, is left out and named in
    ``x-metis-dropped``, the request answered; it was refused before sending ("anthropic would
    refuse this request")."""
    raw = oai.chat.completions.with_raw_response.create(
        model="sonnet", messages=SAID, temperature=1.5, top_p=0.5
    )
    assert raw.headers["x-metis-dropped"] == "temperature 1.5 (the model takes 0 to 1)"
    sent = emulator.bodies("anthropic")[-1]
    assert "temperature" not in sent and sent["top_p"] == 0.5
    assert raw.parse().choices[0].message.content == "You said: Hi"
    raw = oai.responses.with_raw_response.create(model="haiku", input="Hi", temperature=1.25)
    assert raw.headers["x-metis-dropped"] == "temperature 1.25 (the model takes 0 to 1)"
    assert "temperature" not in emulator.bodies("bedrock")[-1].get("inferenceConfig", {})


@pytest.mark.parametrize(
    ("api", "given", "said"),
    [
        ("chat", {"top_p": 1.5}, "top_p: expected a number from 0 to 1"),
        ("chat", {"seed": 1.5}, "seed: expected an integer"),
        ("chat", {"presence_penalty": 3}, "presence_penalty: expected a number from -2 to 2"),
        ("messages", {"top_k": 0}, "top_k: expected an integer from 1"),
        ("messages", {"top_p": "high"}, "top_p: expected a number"),
        # each API's own temperature range: OpenAI's 0 to 2, Anthropic's 0 to 1
        ("chat", {"temperature": 3.0}, "temperature: expected a number from 0 to 2, got 3.0"),
        ("chat", {"temperature": -0.5}, "temperature: expected a number from 0 to 2"),
        ("chat", {"temperature": "hot"}, "temperature: expected a number from 0 to 2"),
        ("responses", {"temperature": 2.5}, "temperature: expected a number from 0 to 2"),
        ("responses", {"top_p": 1.5}, "top_p: expected a number from 0 to 1"),
        ("messages", {"temperature": 1.5}, "temperature: expected a number from 0 to 1, got 1.5"),
        ("messages", {"temperature": True}, "temperature: expected a number from 0 to 1"),
        ("chat", {"top_logprobs": 21}, "top_logprobs: expected an integer from 0 to 20"),
        ("responses", {"top_logprobs": 1.5}, "top_logprobs: expected an integer from 0 to 20"),
        ("chat", {"logit_bias": {"50256": -101}}, "logit_bias: expected a number from -100 to 100"),
        ("chat", {"logit_bias": [1]}, "logit_bias: expected an object"),
    ],
)
def test_a_sampling_value_outside_its_range_is_the_sdks_bad_request(
    claude: Any, oai: Any, api: str, given: dict[str, Any], said: str
) -> None:
    if api == "chat":
        with pytest.raises(openai.BadRequestError) as refused:
            oai.chat.completions.create(model="sonnet", messages=SAID, extra_body=given)
    elif api == "responses":
        with pytest.raises(openai.BadRequestError) as refused:
            oai.responses.create(model="sonnet", input="Hi", extra_body=given)
    else:
        with pytest.raises(anthropic.BadRequestError) as refused:
            claude.messages.create(model="gpt", max_tokens=5, messages=SAID, extra_body=given)
    assert said in str(refused.value)
    body = refused.value.body
    kind = body["error"]["type"] if api == "messages" else body["type"]
    assert (refused.value.status_code, kind) == (400, "invalid_request_error")


def test_an_output_limit_lowered_is_named_as_the_client_named_it(oai: Any) -> None:
    """``x-metis-dropped`` names the field the client gave (it said ``max_tokens`` for every
    API, a field a Responses client never sends)."""
    raw = oai.responses.with_raw_response.create(
        model="flash", input="Hi", max_output_tokens=10_000_000
    )
    assert raw.headers["x-metis-dropped"].startswith("max_output_tokens lowered from 10000000")
    raw = oai.chat.completions.with_raw_response.create(
        model="sonnet", messages=SAID, max_completion_tokens=10_000_000
    )
    assert raw.headers["x-metis-dropped"].startswith("max_completion_tokens lowered from")
    raw = oai.chat.completions.with_raw_response.create(
        model="sonnet", messages=SAID, max_tokens=10_000_000
    )
    assert raw.headers["x-metis-dropped"].startswith("max_tokens lowered from")


def test_a_temperature_the_callers_api_refuses_is_refused_whichever_model_takes_it(
    claude: Any, oai: Any, emulator: Emulator
) -> None:
    """A Chat client's temperature above OpenAI's 2 is refused as OpenAI refuses it (400
    ``invalid_request_error`` naming ``temperature``), though Gemini takes up to 2 as well: it
    was left out and the request answered, streamed or not, routed to Gemini. A Messages
    client's above Anthropic's 1 is refused as Anthropic refuses it, though gpt takes it (it
    was sent on)."""
    sent = len(emulator.bodies("gemini"))
    with pytest.raises(openai.BadRequestError) as refused:
        oai.chat.completions.create(model="flash", messages=SAID, stream=True, temperature=3.0)
    assert refused.value.status_code == 400
    assert refused.value.body["type"] == "invalid_request_error"
    assert refused.value.body["param"] == "temperature"
    assert len(emulator.bodies("gemini")) == sent
    with pytest.raises(anthropic.BadRequestError) as said:
        claude.messages.create(
            model="gpt", max_tokens=50, messages=SAID, extra_body={"temperature": 1.5}
        )
    assert said.value.body["error"]["type"] == "invalid_request_error"
    reply = oai.chat.completions.create(model="flash", messages=SAID, temperature=2.0)
    assert emulator.bodies("gemini")[-1]["generationConfig"]["temperature"] == 2.0
    assert reply.choices[0].message.content == "You said: Hi"


def test_logprobs_and_logit_bias_in_openais_range_are_left_out_and_named(oai: Any) -> None:
    """No model is asked for them: in OpenAI's range they are named, not refused."""
    raw = oai.chat.completions.with_raw_response.create(
        model="flash", messages=SAID, logprobs=True, top_logprobs=20, logit_bias={"50256": -100}
    )
    dropped = raw.headers["x-metis-dropped"]
    assert all(name in dropped for name in ("top_logprobs", "logit_bias"))
    raw = oai.responses.with_raw_response.create(model="flash", input="Hi", top_logprobs=0)
    assert "top_logprobs" in raw.headers["x-metis-dropped"]
