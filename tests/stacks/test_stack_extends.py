"""Stack inheritance (``extends:``) and the wire dialect named once per stack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from metis.errors import ConfigError, StackError
from metis.stacks.loader import builtin_stacks, load_stack, parse_stack

BASE = {
    "name": "base",
    "codec": "openai_chat",
    "endpoint": {"base_url": "http://localhost:1", "path": "/v1/chat/completions"},
    "auth": {"header": "authorization", "scheme": "Bearer", "env": "BASE_KEY"},
    "headers": {"x-a": "1", "x-b": "2"},
    "capabilities": {"supports_tools": True, "max_context_tokens": 1000},
    "stages": [
        "invariants",
        {"tool_ids": {"prefix": "call_"}},
        "thinking_filter",
        "encode",
        "pre_send_check",
        "retry",
        "normalize",
        {"decode": {"format": "sse"}},
        "transport",
    ],
}


def write(folder: Path, name: str, data: dict[str, Any]) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def names(spec: Any) -> list[str]:
    return [entry.name for entry in spec.stages]


def test_a_child_merges_mappings_and_replaces_the_rest(tmp_path: Path) -> None:
    write(tmp_path, "base", BASE)
    child = write(
        tmp_path,
        "child",
        {
            "name": "child",
            "extends": "base.yaml",
            "endpoint": {"base_url": "https://child.example"},
            "auth": {"env": "CHILD_KEY"},
            "headers": {"x-b": None, "x-c": "3"},
            "capabilities": {"max_context_tokens": 5000},
        },
    )
    spec = load_stack(child)
    assert spec.name == "child"
    assert spec.endpoint.base_url == "https://child.example"
    assert spec.endpoint.path == "/v1/chat/completions"  # kept from the parent
    assert (spec.auth.env, spec.auth.header) == ("CHILD_KEY", "authorization")
    assert spec.headers == {"x-a": "1", "x-c": "3"}  # null removes a key
    assert spec.capabilities.supports_tools and spec.capabilities.max_context_tokens == 5000
    assert names(spec) == names(load_stack(tmp_path / "base.yaml"))
    # The base lists no telemetry: the skeleton added it, and says so.
    assert set(spec.stage_sources.values()) == {str(tmp_path / "base.yaml"), "skeleton"}
    assert spec.stage_sources["telemetry"] == "skeleton"


def test_stage_edits_by_name_and_which_file_set_each_stage(tmp_path: Path) -> None:
    write(tmp_path, "base", BASE)
    child = write(
        tmp_path,
        "child",
        {
            "name": "child",
            "extends": "base.yaml",
            "stages": {
                "remove": ["thinking_filter"],
                "options": {"tool_ids": {"max_length": 9}},
                "replace": {"retry": "retry"},
                "insert_after": {"encode": [{"wire_fields": {"drop": ["seed"]}}]},
                "insert_before": {"tool_ids": "capability_check"},
            },
        },
    )
    spec = load_stack(child)
    assert names(spec) == [
        "invariants",
        "capability_check",
        "tool_ids",
        "encode",
        "wire_fields",
        "cache_control",
        "pre_send_check",
        "retry",
        "telemetry",
        "normalize",
        "decode",
        "transport",
    ]
    tool_ids = next(e for e in spec.stages if e.name == "tool_ids")
    assert tool_ids.options == {"prefix": "call_", "max_length": 9}  # re-optioned, merged
    here, base = str(child), str(tmp_path / "base.yaml")
    assert spec.stage_sources["tool_ids"] == here and spec.stage_sources["wire_fields"] == here
    assert spec.stage_sources["invariants"] == base and spec.stage_sources["retry"] == here
    assert spec.stage_sources["telemetry"] == "skeleton"
    spec.build_pipeline()  # and it assembles


@pytest.mark.parametrize(
    ("edits", "rule"),
    [
        ({"insert_before": {"invariants": "capability_check"}}, "invariants-outermost"),
        ({"remove": ["retry"], "insert_after": {"telemetry": "retry"}}, "retry-around-attempts"),
        (
            {"remove": ["invariants"], "insert_after": {"retry": "invariants"}},
            "invariants-outermost",
        ),
        ({"insert_before": {"encode": [{"wire_fields": {"drop": ["seed"]}}]}}, "edits-between"),
        ({"insert_after": {"pre_send_check": "google_auth"}}, "retry-around-attempts"),
        ({"remove": ["invariants"]}, "contract-stages"),
        ({"remove": ["tool_ids"]}, "contract-stages"),
    ],
)
def test_an_edit_that_breaks_the_skeleton_is_refused_naming_the_rule(
    tmp_path: Path, edits: Any, rule: str
) -> None:
    write(tmp_path, "base", BASE)
    child = write(tmp_path, "child", {"name": "c", "extends": "base.yaml", "stages": edits})
    with pytest.raises(StackError, match=f"rule {rule}") as caught:
        load_stack(child)
    assert str(child) in str(caught.value)


def test_chains_are_followed_and_cycles_refused(tmp_path: Path) -> None:
    write(tmp_path, "base", BASE)
    write(tmp_path, "mid", {"name": "mid", "extends": "base.yaml", "headers": {"x-m": "m"}})
    leaf = write(tmp_path, "leaf", {"name": "leaf", "extends": "mid.yaml", "catalog": "groq"})
    spec = load_stack(leaf)
    assert spec.headers["x-m"] == "m" and spec.headers["x-a"] == "1" and spec.catalog == "groq"
    write(tmp_path, "a", {"name": "a", "extends": "b.yaml"})
    write(tmp_path, "b", {"name": "b", "extends": "a.yaml"})
    with pytest.raises(ConfigError, match="cycle"):
        load_stack(tmp_path / "a.yaml")


@pytest.mark.parametrize(
    ("parent", "says"),
    [("antropic", "did you mean 'anthropic'"), ("nosuch.yaml", "cannot read stack file")],
)
def test_a_parent_that_cannot_be_found_is_an_error_naming_the_file_that_extends_it(
    tmp_path: Path, parent: str, says: str
) -> None:
    child = write(tmp_path, "mine", {"name": "mine", "extends": parent})
    leaf = write(tmp_path, "leaf", {"name": "leaf", "extends": "mine.yaml"})
    for path in (child, leaf):
        with pytest.raises(ConfigError) as caught:
            load_stack(path)
        assert str(caught.value).startswith(f"{child}: extends: "), str(caught.value)
        assert says in str(caught.value)


def test_a_builtin_stack_can_be_extended_by_name(tmp_path: Path) -> None:
    child = write(
        tmp_path,
        "mine",
        {
            "name": "mine",
            "extends": "openai",
            "endpoint": {"base_url": "http://localhost:9"},
            "stages": {"remove": "strict_schema"},
        },
    )
    spec = load_stack(child)
    assert spec.codec is None or spec.codec == "openai_chat"
    assert "strict_schema" not in names(spec) and "encode" in names(spec)
    assert spec.stage_sources["encode"] == "skeleton"  # openai.yaml names its codec only
    assert spec.stage_sources["tool_ids"] == "metis/stacks/builtin/openai.yaml"


@pytest.mark.parametrize(
    ("edits", "message"),
    [
        ({"remove": ["nope"]}, "no stage 'nope' to edit; the stages are: invariants"),
        ({"rename": {}}, "unknown edit rename"),
        ({"insert_befor": {}}, "unknown edit insert_befor; expected one of: "),
        ({"insert_befor": {}}, "did you mean 'insert_before' or 'insert_after'?"),
        ({"options": {"tool_ids": "x"}}, "expected a mapping of options"),
        ("encode", "expected a list of stages or a mapping of edits"),
    ],
)
def test_a_bad_edit_names_the_file_and_what_was_expected(
    tmp_path: Path, edits: Any, message: str
) -> None:
    write(tmp_path, "base", BASE)
    child = write(tmp_path, "child", {"name": "c", "extends": "base.yaml", "stages": edits})
    with pytest.raises(ConfigError) as caught:
        load_stack(child)
    assert str(child) in str(caught.value) and message in str(caught.value)


def test_the_codec_is_named_once_and_reaches_every_stage_that_needs_it() -> None:
    spec = parse_stack(BASE)
    options = {e.name: e.options for e in spec.stages}
    assert options["encode"] == {"codec": "openai_chat"}
    assert options["normalize"] == {"codec": "openai_chat"}
    assert options["pre_send_check"] == {"rules": "openai_chat"}


def test_stages_that_disagree_on_the_dialect_fail_at_assembly_naming_them() -> None:
    legacy = {**BASE, "stages": list(BASE["stages"])}
    del legacy["codec"]
    legacy["stages"][3] = {"encode": {"codec": "anthropic"}}
    legacy["stages"][4] = {"pre_send_check": {"rules": "anthropic"}}
    legacy["stages"][6] = {"normalize": {"codec": "openai_chat"}}
    with pytest.raises(StackError) as caught:
        parse_stack(legacy, "legacy.yaml")
    text = str(caught.value)
    assert text.startswith("legacy.yaml:")
    assert "encode says anthropic" in text and "normalize says openai_chat" in text
    with_codec = {**BASE, "stages": [*BASE["stages"][:3], {"encode": {"codec": "anthropic"}}]}
    with pytest.raises(StackError, match="the stack's codec says openai_chat, encode says"):
        parse_stack(with_codec, "mixed.yaml")


def test_a_configured_codec_takes_its_settings_from_the_stack_once() -> None:
    gemini = load_stack("gemini")
    options = {e.name: e.options for e in gemini.stages}
    assert options["encode"]["settings"] == options["normalize"]["settings"]
    assert options["pre_send_check"] == {"rules": "gemini"}


def test_metis_stack_shows_which_file_set_each_stage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from metis.cli import main

    child = write(
        tmp_path,
        "mine",
        {
            "name": "mine",
            "extends": "openai",
            "endpoint": {"base_url": "http://localhost:9"},
            "stages": {"insert_after": {"encode": [{"wire_fields": {"drop": ["seed"]}}]}},
        },
    )
    assert main(["stack", str(child)]) == 0
    out = capsys.readouterr().out
    assert "extends      metis/stacks/builtin/openai.yaml" in out
    rows = {
        line.split()[1]: line.split()[-1] for line in out.splitlines() if line[:3].strip().isdigit()
    }
    assert rows["wire_fields"] == "mine.yaml" and rows["tool_ids"] == "openai.yaml"
    assert rows["encode"] == "skeleton"


COMPATIBLE = ("groq", "together", "vllm", "llamacpp", "openrouter", "mistral", "deepseek")


@pytest.mark.parametrize("name", COMPATIBLE)
def test_each_openai_compatible_stack_is_a_short_file_over_the_shared_base(name: str) -> None:
    from importlib import resources

    text = (resources.files("metis.stacks.builtin") / f"{name}.yaml").read_text(encoding="utf-8")
    lines = [
        line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    assert len(lines) <= 15, f"{name}.yaml has {len(lines)} lines of YAML"
    spec = load_stack(name)
    assert "metis/stacks/builtin/openai_compatible.yaml" in spec.stage_sources.values()
    assert spec.codec == "openai_chat"
    spec.build_pipeline()


def test_a_built_in_stack_file_is_parsed_once_and_each_load_gets_its_own_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from metis.stacks import loader

    parsed: list[str] = []
    original = loader.parse_yaml

    def counting(text: str, source: str) -> Any:
        parsed.append(source)
        return original(text, source)

    loader._parsed_builtin.cache_clear()
    monkeypatch.setattr(loader, "parse_yaml", counting)
    first, first_source = loader._load("groq", None)
    first["name"] = "changed by a caller"
    first["headers"] = {"x-changed": "1"}
    second, _ = loader._load("groq", None)
    assert parsed == ["metis/stacks/builtin/groq.yaml"]
    assert second["name"] == "groq" and "x-changed" not in str(second)
    assert load_stack("groq") == load_stack("groq")
    assert parsed.count("metis/stacks/builtin/groq.yaml") == 1
    assert first_source == "metis/stacks/builtin/groq.yaml"


def test_the_built_in_stacks_are_listed_once_and_each_caller_gets_its_own_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from metis.stacks import loader

    listed: list[str] = []
    original = loader.resources

    class CountingResources:
        @staticmethod
        def files(package: str) -> Any:
            listed.append(package)
            return original.files(package)

    monkeypatch.setattr(loader, "resources", CountingResources)
    first = loader.builtin_stacks()
    first.append("changed by a caller")
    second = loader.builtin_stacks()
    assert loader.builtin_stacks() == second
    assert listed in ([], ["metis.stacks.builtin"])  # at most once in the process
    assert "changed by a caller" not in second
    assert "anthropic" in second and second == sorted(second)


def test_a_stack_reads_a_base_url_variable_only_for_the_host_its_credentials_belong_to() -> None:
    """A stack inherits its parent's endpoint key by key, but not the variable that points the
    parent somewhere else: Azure's key, Google Cloud's token and an Open Responses server's key
    would go wherever $OPENAI_BASE_URL, $GOOGLE_GEMINI_BASE_URL or $ANTHROPIC_BASE_URL lead."""
    readers: dict[str, list[str]] = {}
    for name in sorted(builtin_stacks()):
        variable = load_stack(name).endpoint.base_url_env
        if variable:
            readers.setdefault(variable, []).append(name)
    assert readers == {
        "ANTHROPIC_BASE_URL": ["anthropic"],
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": ["bedrock", "bedrock_anthropic"],
        "GOOGLE_GEMINI_BASE_URL": ["gemini"],
        "GROQ_BASE_URL": ["groq"],
        "OLLAMA_HOST": ["ollama"],
        "OPENAI_BASE_URL": ["openai", "openai_responses", "openai_responses_ws"],
        "TOGETHER_BASE_URL": ["together"],
    }


def test_a_one_line_call_through_a_stack_file_is_priced_by_the_catalog_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``metis.complete("my/stack.yaml:claude-sonnet-4-5", ...)`` over a stack extending
    anthropic costs what the model costs at Anthropic, not 0 with a 'no price' warning."""
    import metis
    from metis.testing.emulator import Emulator

    stack = write(tmp_path, "mine", {"name": "mine", "extends": "anthropic"})
    monkeypatch.chdir(tmp_path)
    with Emulator() as emulator:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
        for model in (f"{stack}:claude-sonnet-4-5", "mine.yaml:claude-sonnet-4-5"):
            reply = metis.complete(model, "Hi")
            assert reply.model == model
            assert reply.cost_usd is not None and reply.cost_usd > 0
