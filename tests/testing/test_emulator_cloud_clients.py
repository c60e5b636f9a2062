"""The cloud platforms' and Ollama's own clients pointed at the emulator, as their users
write them: boto3's bedrock-runtime (Converse and InvokeModel, whole and streamed in AWS
event-stream frames), the ollama Python client, the openai SDK's AzureOpenAI (deployments,
api-version, the api-key header) and google-genai in Vertex mode. Each checks what the
client reads of the real service's answer: a shape, a header, a framing."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from metis.testing.emulator import Emulator

from ..helpers import ImportOnUse

boto3 = ImportOnUse("boto3")
ollama = ImportOnUse("ollama")
openai = ImportOnUse("openai")
genai = ImportOnUse("google.genai")

CLAUDE_ON_BEDROCK = "anthropic.claude-haiku-4-5-20251001-v1:0"
SAID = [{"role": "user", "content": [{"text": "Hi"}]}]
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    with Emulator() as running:
        yield running


# boto3's bedrock-runtime ------------------------------------------------------------------


@pytest.fixture(scope="module")
def bedrock(emulator: Emulator) -> Any:
    config = pytest.importorskip("botocore.config")
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=emulator.url,
        aws_access_key_id="AKIDEMULATOR",
        aws_secret_access_key="emulator/secret/key+EXAMPLE",  # the emulator's (bedrock.py)
        config=config.Config(retries={"max_attempts": 0}),
    )


def test_boto3_converse_whole_and_streamed_with_a_tool(bedrock: Any) -> None:
    answer = bedrock.converse(modelId=CLAUDE_ON_BEDROCK, messages=SAID)
    assert answer["output"]["message"]["content"] == [{"text": "You said: Hi"}]
    assert answer["stopReason"] == "end_turn" and answer["usage"]["outputTokens"] > 0
    assert answer["ResponseMetadata"]["RequestId"]  # boto3 reads x-amzn-RequestId
    tool = {"toolSpec": {"name": "get_weather", "inputSchema": {"json": WEATHER_SCHEMA}}}
    asked = [{"role": "user", "content": [{"text": "Weather in Oslo?"}]}]
    called = bedrock.converse(
        modelId=CLAUDE_ON_BEDROCK, messages=asked, toolConfig={"tools": [tool]}
    )
    (use,) = called["output"]["message"]["content"]
    assert called["stopReason"] == "tool_use" and use["toolUse"]["input"] == {"city": "Oslo"}
    streamed = bedrock.converse_stream(modelId=CLAUDE_ON_BEDROCK, messages=SAID)
    assert streamed["ResponseMetadata"]["RequestId"]
    events = list(streamed["stream"])
    text = "".join(
        e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e
    )
    assert text == "You said: Hi" and events[0] == {"messageStart": {"role": "assistant"}}
    assert events[-2] == {"messageStop": {"stopReason": "end_turn"}}
    assert events[-1]["metadata"]["usage"]["outputTokens"] > 0


def _claude_body(text: str) -> str:
    message = {"role": "user", "content": text}
    return json.dumps(
        {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 100, "messages": [message]}
    )


def test_boto3_invoke_model_answers_as_bedrock_does(bedrock: Any) -> None:
    """Claude's Messages reply with Bedrock's id, the Anthropic model's name, and the token
    counts and latency in headers."""
    answer = bedrock.invoke_model(modelId=CLAUDE_ON_BEDROCK, body=_claude_body("Hi"))
    message = json.loads(answer["body"].read())
    assert message["content"] == [{"type": "text", "text": "You said: Hi"}]
    assert message["id"].startswith("msg_bdrk_") and message["model"] == "claude-haiku-4-5-20251001"
    assert answer["contentType"] == "application/json"
    headers = answer["ResponseMetadata"]["HTTPHeaders"]
    assert answer["ResponseMetadata"]["RequestId"] == headers["x-amzn-requestid"]
    assert int(headers["x-amzn-bedrock-output-token-count"]) == message["usage"]["output_tokens"]
    assert int(headers["x-amzn-bedrock-input-token-count"]) == message["usage"]["input_tokens"]
    assert int(headers["x-amzn-bedrock-invocation-latency"]) > 0


def test_boto3_invoke_model_with_response_stream_reads_the_event_stream(bedrock: Any) -> None:
    """Each Messages event in a ``chunk`` frame (base64 JSON, no ping), the last with the
    invocation's metrics; the content type in X-Amzn-Bedrock-Content-Type."""
    answer = bedrock.invoke_model_with_response_stream(
        modelId=CLAUDE_ON_BEDROCK, body=_claude_body("Yo")
    )
    assert answer["contentType"] == "application/json"
    events = [json.loads(part["chunk"]["bytes"]) for part in answer["body"]]
    kinds = [event["type"] for event in events]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop" and "ping" not in kinds
    assert events[0]["message"]["id"].startswith("msg_bdrk_")
    text = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
    assert text == "You said: Yo"
    metrics = events[-1]["amazon-bedrock-invocationMetrics"]
    assert metrics["outputTokenCount"] == events[-2]["usage"]["output_tokens"]
    assert set(metrics) == {
        "inputTokenCount",
        "outputTokenCount",
        "invocationLatency",
        "firstByteLatency",
    }


def test_boto3_errors_are_its_own_exceptions_with_the_request_id(bedrock: Any) -> None:
    with pytest.raises(bedrock.exceptions.ValidationException) as refused:
        bedrock.converse(modelId="anthropic.claude-nope-v1:0", messages=SAID)
    assert refused.value.response["Error"]["Message"] == "The provided model identifier is invalid."
    assert refused.value.response["ResponseMetadata"]["RequestId"]
    wrong = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=bedrock.meta.endpoint_url,
        aws_access_key_id="AKIDEMULATOR",
        aws_secret_access_key="not-the-secret",
    )
    with pytest.raises(wrong.exceptions.ClientError) as denied:
        wrong.converse(modelId=CLAUDE_ON_BEDROCK, messages=SAID)
    assert denied.value.response["Error"]["Code"] == "InvalidSignatureException"
    assert denied.value.response["ResponseMetadata"]["RequestId"]


def test_the_bedrock_event_stream_is_framed_as_aws_frames_it(
    emulator: Emulator, bedrock: Any
) -> None:
    """The frames botocore's parser checks (prelude and message CRCs, :event-type headers)
    are what the AWS event-stream library reads: decoded here frame by frame."""
    parser = pytest.importorskip("botocore.eventstream")
    streamed = bedrock.invoke_model_with_response_stream(
        modelId=CLAUDE_ON_BEDROCK, body=_claude_body("Hi")
    )
    raw = streamed["body"]._raw_stream.read()
    buffer = parser.EventStreamBuffer()
    buffer.add_data(raw)
    frames = list(buffer)
    assert frames and all(f.headers[":message-type"] == "event" for f in frames)
    assert {f.headers[":event-type"] for f in frames} == {"chunk"}
    assert all(f.headers[":content-type"] == "application/json" for f in frames)
    first = json.loads(base64.b64decode(json.loads(frames[0].payload)["bytes"]))
    assert first["type"] == "message_start"


# the ollama client -------------------------------------------------------------------------


def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
      city: the city
    """
    return "Cold"


def test_the_ollama_client_chats_streamed_and_not(emulator: Emulator) -> None:
    client = ollama.Client(host=emulator.url)
    said = [{"role": "user", "content": "Hi"}]
    answer = client.chat(model="llama3.2", messages=said)
    assert answer.message.content == "You said: Hi" and answer.done and answer.done_reason == "stop"
    assert answer.eval_count and answer.prompt_eval_count and answer.total_duration
    parts = list(client.chat(model="llama3.2", messages=said, stream=True))
    assert "".join(p.message.content or "" for p in parts) == "You said: Hi"
    assert [p.done for p in parts] == [False] * (len(parts) - 1) + [True]
    assert parts[-1].eval_count and parts[-1].done_reason == "stop"
    assert "llama3.2:latest" in [m.model for m in client.list().models]
    with pytest.raises(ollama.ResponseError) as refused:
        client.chat(model="no-such-model", messages=said)
    assert refused.value.status_code == 404
    assert refused.value.error == 'model "no-such-model" not found, try pulling it first'


@pytest.mark.parametrize("streamed", [False, True])
def test_the_ollama_client_runs_a_tool_over_two_turns(emulator: Emulator, streamed: bool) -> None:
    client = ollama.Client(host=emulator.url)
    messages: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]
    if streamed:
        parts = list(
            client.chat(model="llama3.2", messages=messages, tools=[get_weather], stream=True)
        )
        calls = [call for p in parts for call in p.message.tool_calls or []]
        message: Any = {"role": "assistant", "content": "", "tool_calls": calls}
    else:
        message = client.chat(model="llama3.2", messages=messages, tools=[get_weather]).message
        calls = list(message.tool_calls or [])
    (call,) = calls
    assert call.function.name == "get_weather" and call.function.arguments == {"city": "Oslo"}
    messages += [message, {"role": "tool", "content": "Cold", "tool_name": "get_weather"}]
    answer = client.chat(model="llama3.2", messages=messages, tools=[get_weather])
    assert "Cold" in (answer.message.content or "")


# the openai SDK's AzureOpenAI ---------------------------------------------------------------


def test_azure_openai_through_its_deployment_with_api_version_and_api_key(
    emulator: Emulator,
) -> None:
    client = openai.AzureOpenAI(
        api_key="az-key",
        azure_endpoint=emulator.base_url("azure"),
        api_version="2024-10-21",
        azure_deployment="my-gpt4o",
        max_retries=0,
    )
    said = [{"role": "user", "content": "Hi"}]
    answer = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=said)
    sent = emulator.requests[-1]
    assert sent.path.endswith("/openai/deployments/my-gpt4o/chat/completions")
    assert sent.query["api-version"] == "2024-10-21" and sent.headers["api-key"] == "az-key"
    assert answer.headers["apim-request-id"]
    completion = answer.parse()
    assert completion.choices[0].message.content == "You said: Hi"
    filters = completion.model_extra["prompt_filter_results"][0]["content_filter_results"]
    assert filters["hate"] == {"filtered": False, "severity": "safe"}
    assert (
        completion.choices[0].model_extra["content_filter_results"]["violence"]["filtered"] is False
    )
    chunks = list(client.chat.completions.create(model="gpt-4o", messages=said, stream=True))
    assert chunks[0].choices == [] and chunks[0].model_extra["prompt_filter_results"]
    assert (chunks[0].id, chunks[0].model) == ("", "")
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: Hi"
    verdicts = [c.choices[0].model_extra["content_filter_results"] for c in chunks if c.choices]
    said_something = [bool(c.choices[0].delta.content) for c in chunks if c.choices]
    assert said_something[0] is False and verdicts[0] == {}  # the role's chunk
    assert chunks[-1].choices[0].finish_reason == "stop" and verdicts[-1] == {}
    for verdict, spoke in zip(verdicts, said_something, strict=True):
        assert (verdict != {}) is spoke
        assert all(v == {"filtered": False, "severity": "safe"} for v in verdict.values())
    assert set(verdicts[1]) == {"hate", "self_harm", "sexual", "violence"}


def test_azure_openai_responses_and_embeddings_on_the_classic_paths(emulator: Emulator) -> None:
    client = openai.AzureOpenAI(
        api_key="az-key",
        azure_endpoint=emulator.base_url("azure"),
        api_version="2025-04-01-preview",
        max_retries=0,
    )
    assert client.responses.create(model="gpt-4o", input="Hi").output_text == "You said: Hi"
    assert emulator.requests[-1].path.endswith("/openai/responses")
    embedded = client.embeddings.create(model="text-embedding-3-small", input="Hi")
    assert len(embedded.data[0].embedding) == 1536
    sent = emulator.requests[-1]
    assert sent.path.endswith("/openai/deployments/text-embedding-3-small/embeddings")
    assert sent.query["api-version"] == "2025-04-01-preview"


def test_azure_openai_refuses_a_deployment_asked_without_api_version(emulator: Emulator) -> None:
    plain = openai.OpenAI(
        api_key="az-key",
        base_url=emulator.base_url("azure") + "/openai/deployments/my-gpt4o",
        default_headers={"api-key": "az-key"},
        max_retries=0,
    )
    with pytest.raises(openai.NotFoundError) as no_version:  # the OpenAI client sends none
        plain.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hi"}])
    assert no_version.value.body["message"] == "Resource not found"


# google-genai in Vertex mode --------------------------------------------------------------


@pytest.fixture(scope="module")
def vertex(emulator: Emulator) -> Any:
    types = pytest.importorskip("google.genai.types")
    credentials = pytest.importorskip("google.oauth2.credentials")
    return genai.Client(
        vertexai=True,
        project="my-project",
        location="us-central1",
        credentials=credentials.Credentials(token="ya29.emulator"),  # faked: never refreshed
        http_options=types.HttpOptions(base_url=emulator.url),
    )


def test_google_genai_in_vertex_mode(emulator: Emulator, vertex: Any) -> None:
    reply = vertex.models.generate_content(model="gemini-2.5-flash", contents="Hi")
    assert reply.text == "You said: Hi" and reply.usage_metadata.candidates_token_count > 0
    # what Vertex's replies carry beside the Gemini API's (real-traffic/vertex)
    assert reply.create_time is not None and reply.candidates[0].index is None
    assert reply.usage_metadata.traffic_type == "ON_DEMAND"
    sent = emulator.requests[-1]
    assert sent.path == (
        "/v1beta1/projects/my-project/locations/us-central1/publishers/google/models/"
        "gemini-2.5-flash:generateContent"
    )
    assert sent.headers["authorization"] == "Bearer ya29.emulator"
    chunks = list(vertex.models.generate_content_stream(model="gemini-2.5-flash", contents="Yo"))
    assert "".join(chunk.text or "" for chunk in chunks) == "You said: Yo"
    assert all(chunk.create_time is not None for chunk in chunks)
    assert chunks[-1].usage_metadata.traffic_type == "ON_DEMAND"
    assert emulator.requests[-1].query == {"alt": "sse"}
    assert vertex.models.count_tokens(model="gemini-2.5-flash", contents="Hi").total_tokens > 0


def test_google_genai_in_vertex_mode_runs_a_tool(vertex: Any) -> None:
    types = pytest.importorskip("google.genai.types")
    config = types.GenerateContentConfig(
        tools=[get_weather],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    asked = "Weather in Oslo?"
    first = vertex.models.generate_content(model="gemini-2.5-flash", contents=asked, config=config)
    (call,) = first.function_calls
    assert call.name == "get_weather" and call.args == {"city": "Oslo"}
    contents = [
        types.Content(role="user", parts=[types.Part(text=asked)]),
        first.candidates[0].content,
        types.Content(
            role="user",
            parts=[types.Part.from_function_response(name=call.name, response={"result": "Cold"})],
        ),
    ]
    answer = vertex.models.generate_content(
        model="gemini-2.5-flash", contents=contents, config=config
    )
    assert "Cold" in answer.text


def test_google_genai_in_vertex_mode_gets_vertexs_404(vertex: Any) -> None:
    with pytest.raises(genai.errors.ClientError) as refused:
        vertex.models.generate_content(model="gemini-9-nope", contents="Hi")
    assert refused.value.code == 404 and refused.value.status == "NOT_FOUND"
    assert refused.value.message.startswith(
        "Publisher Model `projects/my-project/locations/us-central1/publishers/google/models/"
        "gemini-9-nope` was not found or your project does not have access to it."
    )
