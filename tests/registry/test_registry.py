"""metis.registry: models.yaml -> routes and adapters (docs/models-yaml.md)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from metis.errors import ConfigError, InvalidRequestError
from metis.model.content import Message
from metis.model.request import ThinkingConfig
from metis.registry import NotConfiguredError, Registry

pytestmark = pytest.mark.backend_independent  # stages and mock transports (tests/conftest.py)

# The models.yaml example of docs/models-yaml.md's kind, in full.
SEED_EXAMPLE = """\
# ~/.yourtool/models.yaml
adapters:
  anthropic:
    type: anthropic
    api_key_env: ANTHROPIC_API_KEY
    base_url: https://api.anthropic.com
    timeout_seconds: 600
    max_retries: 2

  openai:
    type: openai
    api_key_env: OPENAI_API_KEY
    base_url: https://api.openai.com
    timeout_seconds: 600
    max_retries: 2

models:
  anthropic:claude-opus-4-7:
    adapter: anthropic
    wire_name: claude-opus-4-7
    tier: deep
    can_delegate: true
    aliases: [opus, deep]
  anthropic:claude-sonnet-4-6:
    adapter: anthropic
    wire_name: claude-sonnet-4-6
    tier: balanced
    can_delegate: true
    aliases: [sonnet, balanced]
  anthropic:claude-haiku-4-5:
    adapter: anthropic
    wire_name: claude-haiku-4-5
    tier: fast
    can_delegate: false
    aliases: [haiku, fast]
  openai:gpt-5:
    adapter: openai
    wire_name: gpt-5
    tier: balanced
    can_delegate: true
    aliases: [gpt5]
"""

ENV = {"ANTHROPIC_API_KEY": "sk-ant-test-0123456789", "OPENAI_API_KEY": "sk-test-openai-0123456789"}

ANTHROPIC_REPLY = {
    "id": "m",
    "type": "message",
    "role": "assistant",
    "model": "x",
    "content": [{"type": "text", "text": "hi"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


def write(tmp_path: Path, text: str, name: str = "models.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def from_dict(data: Any, environ: dict[str, str] | None = None, **kw: Any) -> Registry:
    return Registry.from_dict(
        data, "models.yaml", environ=ENV if environ is None else environ, **kw
    )


def anthropic_only(**model: Any) -> dict[str, Any]:
    return {
        "adapters": {"anthropic": {"type": "anthropic", "api_key_env": "ANTHROPIC_API_KEY"}},
        "models": {"anthropic:claude-sonnet-4-6": {"adapter": "anthropic", **model}},
    }


# Loading and routing -----------------------------------------------------------------------


def test_the_seed_example_loads(tmp_path: Path) -> None:
    registry = Registry.load(write(tmp_path, SEED_EXAMPLE), environ=ENV)
    assert [s.name for s in registry.status()] == ["anthropic", "openai"]
    assert all(s.configured for s in registry.status())
    assert [r.model for r in registry.routes()] == [
        "anthropic:claude-opus-4-7",
        "anthropic:claude-sonnet-4-6",
        "anthropic:claude-haiku-4-5",
        "openai:gpt-5",
    ]
    route = registry.resolve("openai:gpt-5")
    assert (route.adapter_name, route.wire_name, route.tier, route.can_delegate) == (
        "openai",
        "gpt-5",
        "balanced",
        True,
    )
    assert registry.resolve("haiku").can_delegate is False


def test_an_alias_and_the_canonical_id_resolve_to_the_same_route(tmp_path: Path) -> None:
    registry = Registry.load(write(tmp_path, SEED_EXAMPLE), environ=ENV)
    for alias in ("sonnet", "balanced"):
        assert registry.resolve(alias) == registry.resolve("anthropic:claude-sonnet-4-6")
    route = registry.resolve("opus")
    assert route.model == "anthropic:claude-opus-4-7"
    assert route.wire_name == "claude-opus-4-7"
    assert route.aliases == ("opus", "deep")
    assert route.request_model == "anthropic:claude-opus-4-7"


def test_wire_name_defaults_to_the_id_after_the_provider_prefix() -> None:
    registry = from_dict(anthropic_only())
    assert registry.resolve("anthropic:claude-sonnet-4-6").wire_name == "claude-sonnet-4-6"
    renamed = from_dict(anthropic_only(wire_name="claude-sonnet-4-6-20260101"))
    assert renamed.resolve("anthropic:claude-sonnet-4-6").wire_name == "claude-sonnet-4-6-20260101"


@pytest.mark.anyio
async def test_request_builds_a_request_the_adapter_sends_under_the_wire_name() -> None:
    data = anthropic_only(wire_name="claude-sonnet-4-6-20260101", aliases=["sonnet"])
    registry = from_dict(data)
    adapter, request = registry.request(
        "sonnet", messages=[Message.user("hello")], max_output_tokens=16
    )
    assert request.model == "anthropic:claude-sonnet-4-6-20260101"
    assert adapter.wire_model(request.model) == "claude-sonnet-4-6-20260101"
    assert adapter is registry.adapter("sonnet")
    with pytest.raises(TypeError, match="model"):
        registry.request("sonnet", model="x", messages=[], max_output_tokens=1)
    await registry.aclose()


@pytest.mark.anyio
async def test_request_without_max_output_tokens_takes_the_one_line_calls_default() -> None:
    """A new user leaving out max_output_tokens (metis.complete needs none) got pydantic's
    'Field required'; the request takes the model's own limit up to 4,096, and a thinking
    budget's tokens more, as the one-line calls and sessions do (docs/calls.md)."""
    registry = from_dict(anthropic_only(aliases=["sonnet"]))
    _, request = registry.request("sonnet", messages=[Message.user("hello")])
    assert request.max_output_tokens == 4096
    thinking = ThinkingConfig(budget_tokens=2000)
    _, request = registry.request("sonnet", messages=[Message.user("hi")], thinking=thinking)
    assert request.max_output_tokens == 4096 + 2000
    small = from_dict(anthropic_only(aliases=["sonnet"], capabilities={"max_output_tokens": 1000}))
    _, request = small.request("sonnet", messages=[Message.user("hello")])
    assert request.max_output_tokens == 1000
    _, request = small.request("sonnet", messages=[Message.user("hi")], max_output_tokens=10)
    assert request.max_output_tokens == 10
    await registry.aclose()
    await small.aclose()


@pytest.mark.anyio
async def test_request_refuses_a_misspelt_field_naming_the_nearest() -> None:
    registry = from_dict(anthropic_only(aliases=["sonnet"]))
    with pytest.raises(ValidationError, match="did you mean 'temperature'"):
        registry.request("sonnet", messages=[], max_output_tokens=1, temprature=0.5)
    await registry.aclose()


def test_capability_overrides_merge_with_the_stack_and_reach_the_adapter() -> None:
    data = anthropic_only(capabilities={"max_context_tokens": 1_000_000, "supports_images": False})
    data["models"]["anthropic:claude-haiku-4-5"] = {"adapter": "anthropic"}
    registry = from_dict(data)
    route = registry.resolve("anthropic:claude-sonnet-4-6")
    assert route.capabilities.max_context_tokens == 1_000_000
    assert route.capabilities.supports_images is False
    assert route.capabilities.supports_tools is True  # from the anthropic stack
    assert route.capabilities.max_output_tokens == 64_000  # from the anthropic stack

    adapter = registry.adapter("anthropic:claude-sonnet-4-6")
    assert adapter.capabilities_for("claude-sonnet-4-6") == route.capabilities
    assert adapter.capabilities.max_context_tokens == 1_000_000

    plain = registry.adapter("anthropic:claude-haiku-4-5")
    assert plain is not adapter
    assert plain.capabilities.max_context_tokens == 200_000
    assert plain is registry.adapter("anthropic")  # the entry's own adapter, no overrides
    assert registry.adapter("anthropic:claude-sonnet-4-6") is adapter  # built once


def test_models_with_the_same_overrides_share_an_adapter() -> None:
    caps = {"max_context_tokens": 50_000}
    data = anthropic_only(capabilities=caps)
    data["models"]["anthropic:claude-haiku-4-5"] = {"adapter": "anthropic", "capabilities": caps}
    registry = from_dict(data)
    assert registry.adapter("anthropic:claude-haiku-4-5") is registry.adapter(
        "anthropic:claude-sonnet-4-6"
    )


# API keys ----------------------------------------------------------------------------------


def test_a_missing_env_var_leaves_the_adapter_not_configured(tmp_path: Path) -> None:
    registry = Registry.load(
        write(tmp_path, SEED_EXAMPLE), environ={"OPENAI_API_KEY": "sk-test-openai-0123456789"}
    )
    status = {s.name: s for s in registry.status()}
    assert status["openai"].status == "configured"
    assert status["anthropic"].status == "not_configured"
    assert status["anthropic"].reason is not None
    assert "ANTHROPIC_API_KEY" in status["anthropic"].reason
    assert registry.resolve("gpt5").model == "openai:gpt-5"
    # The model is still listed, and routing to it says what to set.
    assert "anthropic:claude-opus-4-7" in [r.model for r in registry.routes()]
    for call in (registry.resolve, registry.adapter):
        with pytest.raises(NotConfiguredError) as caught:
            call("opus")
        message = str(caught.value)
        assert "ANTHROPIC_API_KEY" in message
        assert "anthropic:claude-opus-4-7" in message and "'anthropic'" in message
        assert caught.value.api_key_env == "ANTHROPIC_API_KEY"
        assert isinstance(caught.value, ConfigError)
    with pytest.raises(NotConfiguredError, match="ANTHROPIC_API_KEY"):
        registry.adapter("anthropic")
    with pytest.raises(NotConfiguredError):
        registry.request("sonnet", messages=[], max_output_tokens=1)


def test_a_routes_adapter_reads_only_its_entrys_key_variable(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An entry naming its own ``api_key_env``, unset: its model is not configured, and the
    routes' adapter of it has no key either, rather than the stack's own variable's (set
    here); the route's skip names the entry's variable."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-the-stacks-own-variable")
    data = anthropic_only(aliases=["sonnet"])
    data["adapters"]["anthropic"]["api_key_env"] = "TEAM_ANTHROPIC_KEY"
    data["routes"] = {"main": {"models": ["sonnet"]}}
    registry = from_dict(data, environ={})
    assert registry.status()[0].status == "not_configured"
    with caplog.at_level("WARNING"):
        router = registry.router("main")
    (target,) = router.targets
    assert target.adapter.endpoint.api_key is None
    assert "set TEAM_ANTHROPIC_KEY" in caplog.text and "ANTHROPIC_API_KEY" not in caplog.text


def test_an_empty_env_var_counts_as_missing() -> None:
    registry = from_dict(anthropic_only(), environ={"ANTHROPIC_API_KEY": ""})
    assert registry.status()[0].status == "not_configured"


def test_api_key_env_defaults_to_the_stacks_variable() -> None:
    data = anthropic_only()
    del data["adapters"]["anthropic"]["api_key_env"]
    assert from_dict(data).status()[0].configured
    missing = from_dict(data, environ={})
    assert missing.status()[0].api_key_env == "ANTHROPIC_API_KEY"
    assert not missing.status()[0].configured


def test_a_plaintext_api_key_works_with_one_warning_that_hides_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "sk-ant-plaintext-SECRET-0123456789"
    data = anthropic_only()
    data["adapters"]["anthropic"] = {"type": "anthropic", "api_key": secret}
    with caplog.at_level(logging.WARNING, logger="metis"):
        registry = from_dict(data, environ={})
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    text = warnings[0].getMessage()
    assert "anthropic" in text and "api_key_env" in text
    assert secret not in text and secret not in str(warnings[0].__dict__)
    assert registry.status()[0].configured
    assert registry.adapter("anthropic").config.api_key == secret


def test_a_config_error_never_echoes_a_plaintext_key() -> None:
    data = anthropic_only()
    data["adapters"]["anthropic"] = {"type": "anthropic", "api_key": 12345678901234567890}
    with pytest.raises(ConfigError) as caught:
        from_dict(data)
    assert "adapters.anthropic.api_key: expected a string" in str(caught.value)
    assert "12345678901234567890" not in str(caught.value)


# Config errors name the file, the dotted key and what was expected ------------------------


def adapters(**entry: Any) -> dict[str, Any]:
    return {"adapters": {"anthropic": {"type": "anthropic", **entry}}, "models": {}}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            adapters(timeout_seconds="abc"),
            "adapters.anthropic.timeout_seconds: expected a number, got 'abc'",
        ),
        (
            adapters(timeout_seconds=0),
            "adapters.anthropic.timeout_seconds: expected a number > 0, got 0",
        ),
        (
            adapters(max_retries=1.5),
            "adapters.anthropic.max_retries: expected a whole number, got 1.5",
        ),
        (
            adapters(max_retries=-1),
            "adapters.anthropic.max_retries: expected a number >= 0, got -1",
        ),
        (
            adapters(base_url=443),
            "adapters.anthropic.base_url: expected a string, got 443",
        ),
        (
            adapters(extra_headers=["x"]),
            "adapters.anthropic.extra_headers: expected a mapping",
        ),
        (
            adapters(api_key_envv="X"),
            "adapters.anthropic.api_key_envv: unknown key; expected one of: type, api_key_env",
        ),
        (
            {"adapters": {"anthropic": {"api_key_env": "X"}}, "models": {}},
            "adapters.anthropic.type: required key is missing",
        ),
        (
            {"adapters": {"anthropic": None}},
            "adapters.anthropic: expected a mapping, got nothing",
        ),
        (
            adapters(type="antropic"),
            "adapters.anthropic.type: expected a built-in stack (anthropic, ",
        ),
        (
            adapters(type="antropic"),
            "or a path to a stack file (.yaml), got 'antropic'; did you mean 'anthropic'",
        ),
        (
            adapters(type="stacks/missing.yaml"),
            "adapters.anthropic.type: expected a usable stack file, got 'stacks/missing.yaml'",
        ),
        (
            {"adapters": {}, "modles": {}},
            "modles: unknown key; expected one of: adapters, models, routes; did you mean "
            "'models'?",
        ),
        (
            anthropic_only(can_delegate="perhaps"),
            "models.anthropic:claude-sonnet-4-6.can_delegate: expected true or false, "
            "got 'perhaps'",
        ),
        (
            anthropic_only(aliases="sonnet"),
            "models.anthropic:claude-sonnet-4-6.aliases: expected a list, got 'sonnet'",
        ),
        (
            anthropic_only(aliasses=["s"]),
            "models.anthropic:claude-sonnet-4-6.aliasses: unknown key; expected one of: adapter,",
        ),
        (
            anthropic_only(aliasses=["s"]),
            "did you mean 'aliases'?",
        ),
        (
            anthropic_only(teir="fast"),
            "models.anthropic:claude-sonnet-4-6.teir: unknown key; expected one of: adapter,",
        ),
        (
            anthropic_only(capabilities={"max_context_tokens": "lots"}),
            "models.anthropic:claude-sonnet-4-6.capabilities.max_context_tokens: "
            "expected a whole number, got 'lots'",
        ),
        (
            anthropic_only(capabilities={"supports_telepathy": True}),
            "models.anthropic:claude-sonnet-4-6.capabilities.supports_telepathy: unknown key; "
            "expected one of: supports_images",
        ),
        (
            {
                "adapters": {},
                "models": {"anthropic:claude-sonnet-4-6": {"adapter": "anthropic"}},
            },
            "models.anthropic:claude-sonnet-4-6.adapter: model anthropic:claude-sonnet-4-6 names "
            "adapter 'anthropic', which is not declared; expected one of the adapters: none (the "
            "file declares no adapters; declare each as adapters: {NAME: {type: STACK}}",
        ),
        (
            {
                "adapters": {"anthropic": {"type": "anthropic"}},
                "models": {"anthropic:claude-sonnet-4-6": {"adapter": "antropic"}},
            },
            "adapter 'antropic', which is not declared; expected one of the adapters: anthropic; "
            "did you mean 'anthropic'?",
        ),
        (["a", "list"], "expected a mapping with adapters and models, got ['a', 'list']"),
        (
            {
                **anthropic_only(aliases=["sonnet"]),
                "routes": {"main": {"models": ["sonnet"], "fallback_on": ["overload"]}},
            },
            "routes.main.fallback_on.0: expected 'rate_limit', 'overloaded', 'auth', ",
        ),
        (
            {
                **anthropic_only(aliases=["sonnet"]),
                "routes": {"main": {"models": ["sonnet"], "fallback_on": ["overload"]}},
            },
            "got 'overload'; did you mean 'overloaded'?",
        ),
        (
            {**anthropic_only(aliases=["sonnet"]), "routes": {"main": {"models": ["sonet"]}}},
            "route 'main' names model 'sonet', which is not under models: (known: "
            "anthropic:claude-sonnet-4-6, sonnet); did you mean 'sonnet'?",
        ),
    ],
)
def test_every_config_error_names_file_key_and_expectation(data: Any, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        from_dict(data)
    message = str(caught.value)
    assert message.startswith("models.yaml: "), message
    assert expected in message, message


def test_duplicate_aliases_name_both_models() -> None:
    data = anthropic_only(aliases=["fast"])
    data["models"]["anthropic:claude-haiku-4-5"] = {"adapter": "anthropic", "aliases": ["fast"]}
    with pytest.raises(ConfigError) as caught:
        from_dict(data)
    message = str(caught.value)
    assert message.startswith("models.yaml: models.anthropic:claude-haiku-4-5.aliases:")
    assert "anthropic:claude-sonnet-4-6" in message and "anthropic:claude-haiku-4-5" in message
    assert "'fast'" in message


def test_an_alias_may_not_be_another_models_id() -> None:
    data = anthropic_only()
    data["models"]["anthropic:claude-haiku-4-5"] = {
        "adapter": "anthropic",
        "aliases": ["anthropic:claude-sonnet-4-6"],
    }
    with pytest.raises(ConfigError, match="is the id of model anthropic:claude-sonnet-4-6"):
        from_dict(data)


def test_bad_yaml_and_unreadable_files_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"models\.yaml: not valid YAML") as refused:
        Registry.load(write(tmp_path, "routes:\n  default: {models: [a, b}\n"), environ=ENV)
    # one line, with the place in the file (not PyYAML's "<unicode string>")
    assert str(refused.value).endswith(
        "models.yaml: not valid YAML: line 2, column 26: did not find expected ',' or ']' "
        "(while parsing a flow sequence at line 2, column 21)"
    )
    with pytest.raises(ConfigError, match=r"nowhere\.yaml"):
        Registry.load(tmp_path / "nowhere.yaml")
    with pytest.raises(ConfigError, match="expected a mapping with adapters and models"):
        Registry.load(write(tmp_path, "", "empty.yaml"), environ=ENV)


def test_a_stack_file_is_found_relative_to_the_models_yaml(tmp_path: Path) -> None:
    (tmp_path / "stacks").mkdir()
    stack = Path(__file__).parents[2] / "metis" / "stacks" / "builtin" / "anthropic.yaml"
    text = stack.read_text(encoding="utf-8").replace("name: anthropic", "name: proxy")
    write(tmp_path / "stacks", text, "proxy.yaml")
    registry = Registry.load(
        write(
            tmp_path,
            "adapters:\n  p: {type: stacks/proxy.yaml, api_key_env: PROXY_KEY}\n"
            "models:\n  proxy:claude-x: {adapter: p, aliases: [x]}\n",
        ),
        environ={"PROXY_KEY": "k"},
    )
    adapter, request = registry.request("x", messages=[Message.user("hi")], max_output_tokens=8)
    assert adapter.name == "proxy"
    assert request.model == "proxy:claude-x"
    assert adapter.wire_model(request.model) == "claude-x"


def test_an_unknown_model_suggests_close_matches(tmp_path: Path) -> None:
    registry = Registry.load(write(tmp_path, SEED_EXAMPLE), environ=ENV)
    with pytest.raises(InvalidRequestError) as caught:
        registry.resolve("sonet")
    assert "'sonet'" in str(caught.value) and "did you mean 'sonnet'" in str(caught.value)
    with pytest.raises(InvalidRequestError, match="anthropic:claude-opus-4-7"):
        registry.resolve("anthropic:claude-opus-4-6")
    with pytest.raises(InvalidRequestError, match="known models: "):
        registry.adapter("zzzzzz")


# Adapters built through the registry -------------------------------------------------------


@pytest.mark.anyio
async def test_an_adapter_sends_to_the_configured_base_url_with_the_env_key() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=ANTHROPIC_REPLY)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    data = anthropic_only(wire_name="claude-sonnet-4-6-20260101", aliases=["sonnet"])
    data["adapters"]["anthropic"].update(
        base_url="https://proxy.example.com", extra_headers={"x-team": "blue"}, max_retries=0
    )
    registry = from_dict(
        data,
        environ={"ANTHROPIC_API_KEY": "sk-ant-from-env-0123456789"},
        clients={"anthropic": client},
    )
    async with registry:
        adapter, request = registry.request(
            "sonnet", messages=[Message.user("hello")], max_output_tokens=16
        )
        response = await adapter.complete(request)
    assert response.text == "hi"
    assert len(seen) == 1
    sent = seen[0]
    assert str(sent.url) == "https://proxy.example.com/v1/messages"
    assert sent.headers["x-api-key"] == "sk-ant-from-env-0123456789"
    assert sent.headers["x-team"] == "blue"
    assert json.loads(sent.content)["model"] == "claude-sonnet-4-6-20260101"
    assert adapter.config.max_retries == 0
    assert not client.is_closed  # the caller's client stays the caller's to close
    await client.aclose()


@pytest.mark.anyio
async def test_aclose_closes_the_pools_the_registry_made(tmp_path: Path) -> None:
    registry = Registry.load(write(tmp_path, SEED_EXAMPLE), environ=ENV)
    opus, sonnet = registry.adapter("opus"), registry.adapter("sonnet")
    assert opus is sonnet  # no overrides: one adapter per entry
    client = opus.config.http_client
    assert client is not None and not client.is_closed
    assert registry.adapter("gpt5").config.http_client is not client
    await registry.aclose()
    assert client.is_closed


def test_a_registry_never_closed_says_so_and_how_as_a_resource_warning(tmp_path: Path) -> None:
    import gc
    import warnings

    with warnings.catch_warnings():  # what earlier tests left unclosed warns now, not below
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    forgotten = Registry.load(write(tmp_path, SEED_EXAMPLE), environ=ENV)
    forgotten.adapter("opus")  # a connection pool made for it
    with pytest.warns(ResourceWarning, match="models.yaml was never closed") as seen:
        del forgotten
        gc.collect()
    ours = [str(w.message) for w in seen if "Registry of" in str(w.message)]
    assert ours and all("'await registry.aclose()'" in said for said in ours)
    unused = Registry.load(write(tmp_path, SEED_EXAMPLE), environ=ENV)  # nothing opened
    with warnings.catch_warnings(record=True) as later:
        warnings.simplefilter("always", ResourceWarning)
        del unused
        gc.collect()
    assert not [w for w in later if "Registry of" in str(w.message)]


LIFECYCLE: list[str] = []


@pytest.mark.anyio
async def test_the_registry_runs_each_adapters_lifecycle_hooks(tmp_path: Path) -> None:
    from metis.pipeline.registry import StageRegistry, stages
    from metis.pipeline.stage import Stage

    class Lifecycle(Stage[Any, Any, Any, Any]):
        name = "lifecycle_probe"

        async def init(self, adapter: Any) -> None:
            LIFECYCLE.append(f"init {adapter.name}")

        async def dispose(self, adapter: Any) -> None:
            LIFECYCLE.append(f"dispose {adapter.name}")

        def __call__(self, request: Any, call: Any, inner: Any) -> Any:
            return inner(request, call)

    registry: StageRegistry = stages
    registry.register(Lifecycle)
    stack = tmp_path / "probed.yaml"
    stack.write_text(
        "name: probed\nextends: anthropic\n"
        "stages: {insert_after: {invariants: [lifecycle_probe]}}\n",
        encoding="utf-8",
    )
    models = tmp_path / "models.yaml"
    models.write_text(
        f"adapters:\n  probed: {{type: {stack}, api_key_env: PROBE_KEY}}\n"
        "models:\n  probed:m: {adapter: probed}\n",
        encoding="utf-8",
    )
    answer = {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }  # fmt: skip
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: httpx.Response(200, json=answer))
    )
    LIFECYCLE.clear()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PROBE_KEY", "k")
        registry_ = Registry.load(models, clients={"probed": client})
    adapter, request = registry_.request(
        "probed:m", messages=[Message.user("hi")], max_output_tokens=10
    )
    assert LIFECYCLE == []  # built, not yet used
    await adapter.complete(request)
    await adapter.complete(request)
    assert LIFECYCLE == ["init probed"]  # once, before the first call
    await registry_.aclose()
    assert LIFECYCLE == ["init probed", "dispose probed"]
    await client.aclose()
