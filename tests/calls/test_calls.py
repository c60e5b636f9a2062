"""One-line calls (metis.complete / acomplete / stream / astream) against the emulator."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import metis
from metis.calls import CallOptions, adapters
from metis.errors import ConfigError
from metis.model import MessageComplete, TextDelta, ToolDefinition
from metis.registry import NotConfiguredError
from metis.routing import Router
from metis.testing.emulator import Emulator

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.fixture
def at_emulator(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> Emulator:
    """The SDKs' conventional variables point at the emulator, as a user would set them."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("OPENAI_BASE_URL", emulator.url + "/v1")  # the OpenAI SDK's form
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", emulator.url)
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(key, "test-key")
    return emulator


def test_the_synchronous_one_liner_answers_where_no_loop_runs(at_emulator: Emulator) -> None:
    reply = metis.complete("anthropic:claude-sonnet-4-5", "Say hello.")
    assert reply.text and reply.stop_reason.kind == "end_turn"
    assert reply.provider == "anthropic" and reply.usage.output_tokens > 0
    again = metis.complete("openai:gpt-4o", [{"role": "user", "content": "Say hello."}])
    assert again.text
    assert at_emulator.stats.requests == 2


def test_bedrock_is_pointed_elsewhere_by_the_variable_boto3_reads(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AWS_ENDPOINT_URL_BEDROCK_RUNTIME (a VPC endpoint, or the emulator) is Bedrock's base URL
    as ANTHROPIC_BASE_URL is Anthropic's, for Converse, InvokeModel and the embeddings alike
    (the embeddings went to AWS itself)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", emulator.url)
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "test-key")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    assert metis.complete(f"bedrock:{model}", "Say hello.").text == "You said: Say hello."
    assert metis.complete(f"bedrock_anthropic:{model}", "Hi.").text == "You said: Hi."
    embedded = metis.embed("bedrock:amazon.titan-embed-text-v2:0", ["a", "b"], max_retries=0)
    assert len(embedded.vectors) == 2
    assert emulator.stats.requests == 4  # Titan embeds one text a request


def test_the_synchronous_stream_yields_events_ending_in_message_complete(
    at_emulator: Emulator,
) -> None:
    events = list(
        metis.stream("gemini:gemini-2.5-flash", "What is the weather in Paris?", tools=[WEATHER])
    )
    assert isinstance(events[-1], MessageComplete)
    assert events[-1].stop_reason.kind in ("tool_use", "end_turn")


def test_a_stream_left_early_is_closed(at_emulator: Emulator) -> None:
    for event in metis.stream("anthropic:claude-sonnet-4-5", "Tell me a long story."):
        if isinstance(event, TextDelta):
            break
    reply = metis.complete("anthropic:claude-sonnet-4-5", "And now?")  # the loop still serves
    assert reply.text


@pytest.mark.anyio
async def test_the_async_forms_reuse_one_adapter_per_loop(at_emulator: Emulator) -> None:
    first = await metis.acomplete("anthropic:claude-sonnet-4-5", "Hi", max_output_tokens=50)
    kinds = [type(e).__name__ async for e in metis.astream("anthropic:claude-sonnet-4-5", "Hi")]
    assert first.text and kinds[-1] == "MessageComplete"
    held = adapters.this_loop()
    assert len(held) == 1  # same stack, same settings: one adapter
    await metis.acomplete("anthropic:claude-sonnet-4-5", "Hi", timeout_seconds=30)
    assert len(held) == 2  # other settings: another one
    await held.aclose()


def test_one_line_token_counting_asks_the_provider_where_it_can(at_emulator: Emulator) -> None:
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    counted = metis.count_tokens("anthropic:claude-sonnet-4-5", messages, tools=[WEATHER])
    assert counted.source == "provider" and counted.input_tokens > 0
    asked = at_emulator.requests[-1]
    assert asked.path.endswith("/v1/messages/count_tokens")
    assert asked.json()["tools"][0]["name"] == "get_weather"  # what would be sent is counted
    estimated = metis.count_tokens("openai:gpt-4o", messages)  # Chat Completions cannot count
    assert estimated.source == "estimate" and estimated.input_tokens > 0


@pytest.mark.anyio
async def test_one_line_token_counting_has_an_async_form(at_emulator: Emulator) -> None:
    counted = await metis.acount_tokens("gemini:gemini-2.5-flash", "Hi", system="Be brief.")
    assert counted.source == "provider" and counted.input_tokens > 0
    assert ":countTokens" in at_emulator.requests[-1].path


@pytest.mark.parametrize("function", [metis.complete, metis.stream])
def test_the_docstrings_of_complete_and_stream_say_what_every_option_does(
    function: object,
) -> None:
    doc = function.__doc__ or ""
    for option in sorted(CallOptions.__optional_keys__):
        assert f"- ``{option}``: " in doc, option


def test_a_missing_key_names_the_variable_before_anything_is_sent(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    with pytest.raises(NotConfiguredError, match="set ANTHROPIC_API_KEY") as caught:
        metis.complete("anthropic:claude-sonnet-4-5", "Hi")
    assert caught.value.api_key_env == "ANTHROPIC_API_KEY"
    assert emulator.stats.requests == 0
    # the provider said once, in front: not "anthropic auth: anthropic: no API key ..."
    assert str(caught.value) == (
        "anthropic auth: no API key: set ANTHROPIC_API_KEY (or pass api_key=...)"
    )


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("claude-sonnet-4-5", "'provider:model'.*did you mean 'anthropic:claude-sonnet-4-5'"),
        ("gpt-4o", "did you mean 'openai:gpt-4o'"),
        (  # a models.yaml's alias, say: where such names go
            "no-such-model",
            r"got 'no-such-model'; a name of a models.yaml goes through its Registry: "
            r"registry.request\('no-such-model', ...\), or a route's Router",
        ),
        ("nowhere:x", "no built-in stack"),
        (  # the model name a Router's requests carry: a route is given as its Router
            "route:smart",
            r"'route:smart' names a route; a call takes the route as its Router: "
            r"metis.complete\(Registry.load\(path\).router\('smart'\), ...\)",
        ),
    ],
)
def test_a_model_string_that_names_no_stack_is_a_config_error(model: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        metis.complete(model, "Hi")


def test_a_base_url_without_a_scheme_fails_before_sending(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "localhost:9")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    with pytest.raises(ConfigError, match="ANTHROPIC_BASE_URL: expected a URL with its scheme"):
        metis.complete("anthropic:claude-sonnet-4-5", "Hi")


@pytest.mark.slow
def test_the_readme_one_liner_runs_unchanged_against_the_emulator(emulator: Emulator) -> None:
    with open("README.md", encoding="utf-8") as file:
        readme = file.read()
    start = readme.index("```python\n", readme.index("## One line")) + len("```python\n")
    code = readme[start : readme.index("```", start)]
    assert len(code.strip().splitlines()) <= 5
    env = {"ANTHROPIC_BASE_URL": emulator.url, "ANTHROPIC_API_KEY": "test-key", "PATH": ""}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


def test_ollama_is_pointed_elsewhere_by_ollama_host_as_ollama_reads_it(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OLLAMA_HOST, host:port as most users set it, is the Ollama stacks' base URL (chat and
    embeddings); an explicit base_url still wins."""
    monkeypatch.setenv("OLLAMA_HOST", emulator.url.removeprefix("http://"))
    assert metis.complete("ollama:llama3.2", "Say hello.").text == "You said: Say hello."
    assert len(metis.embed("ollama:nomic-embed-text", ["a", "b"]).vectors) == 2
    assert emulator.stats.requests >= 2
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:9")  # nothing listens there
    reply = metis.complete("ollama:llama3.2", "Hi.", base_url=emulator.url)
    assert reply.text == "You said: Hi."


def test_an_ollama_model_named_in_the_call_is_asked_what_it_can_do(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ollama:qwen3`` with tools: the server lists tools for qwen3 (/api/show), and the
    one-line call and a session now ask it; the stack's defaults (no tools) refused the call
    with a CapabilityError unless ``settings={'model': ...}`` named the model again."""

    @metis.tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"18 C in {city}"

    monkeypatch.setenv("OLLAMA_HOST", emulator.url)
    reply = metis.complete("ollama:qwen3", "Weather in Paris?", tools=[get_weather])
    assert [call.input for call in reply.tool_calls] == [{"city": "Paris"}]
    session = metis.Session("ollama:llama3.2", tools=[get_weather])
    assert session.run("Weather in Rome?").text == "According to get_weather: 18 C in Rome."
    named = metis.complete("ollama:qwen3", "Hi", settings={"model": "qwen3:latest"})
    assert named.text == "You said: Hi"  # a model the settings name is theirs
    routed = metis.complete(Router(["ollama:qwen3"]), "Weather in Oslo?", tools=[get_weather])
    assert routed.model == "ollama:qwen3" and routed.tool_calls  # a router asks it too


@pytest.mark.parametrize(
    ("given", "url"),
    [
        ("gpu-box", "http://gpu-box:11434"),
        ("gpu-box:8080", "http://gpu-box:8080"),
        (":9000", "http://localhost:9000"),
        ("[::1]", "http://[::1]:11434"),
        (" 10.0.0.2:11434/ollama ", "http://10.0.0.2:11434/ollama"),
        ("https://ollama.example", "https://ollama.example"),
        ("", None),
    ],
)
def test_ollama_host_takes_a_host_a_host_and_port_or_a_url(
    given: str, url: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from metis.stacks.embedding import load_embedding_stack
    from metis.stacks.loader import load_stack

    monkeypatch.setenv("OLLAMA_HOST", given)
    assert load_stack("ollama").endpoint.env_base_url() == url
    assert load_embedding_stack("ollama").endpoint.env_base_url() == url


@pytest.mark.parametrize("given", ["gpu-box:99999", "gpu-box:port", "user@gpu-box"])
def test_an_ollama_host_that_is_no_host_is_a_config_error_naming_it(
    given: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", given)
    with pytest.raises(ConfigError, match="OLLAMA_HOST: expected host"):
        metis.complete("ollama:llama3.2", "Hi")


def test_bedrock_says_which_stop_sequence_ended_the_reply_on_both_apis(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """InvokeModel answers in Anthropic's form (``stop_sequence``); Converse in the model's own
    fields (``additionalModelResponseFields.stop_sequence``, asked for), streamed or not."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", emulator.url)
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "test-key")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    for stack in ("bedrock", "bedrock_anthropic"):
        reply = metis.complete(f"{stack}:{model}", "Hi.", stop_sequences=["said"])
        assert reply.text == "You " and reply.stop_reason.kind == "stop_sequence"
        assert reply.stop_reason.sequence == "said"
        events = list(metis.stream(f"{stack}:{model}", "Hi.", stop_sequences=["said"]))
        assert isinstance(events[-1], MessageComplete)
        assert events[-1].stop_reason.sequence == "said"


def test_stop_sequences_to_the_responses_api_are_left_out_with_a_warning(
    at_emulator: Emulator,
) -> None:
    """docs/contract.md §13, as the codec had it: the stack's supports_stop_sequences: false
    refused them first (a CapabilityError), so one request could not serve every model."""
    reply = metis.complete("openai_responses:gpt-5.1", "Hi.", stop_sequences=["said"])
    assert reply.text == "You said: Hi."  # nothing cut: the API has no stop parameter
    assert [w.block_type for w in reply.warnings] == ["stop_sequences"]
    assert "stop" not in at_emulator.bodies("openai_responses")[-1]
