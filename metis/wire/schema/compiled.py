"""The schema-driven codec's settings compiled: dot paths into getters, templates into trees.

:func:`load_settings` validates a stack's settings (:class:`SchemaSettings`, once a stack:
:mod:`metis.wire.schema.settings` says when) and compiles them into :class:`Compiled`, which
is what the encoder and parsers read: :class:`Reading` for a response or stream schema.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from metis.errors import StackError
from metis.model.stop import StopKind
from metis.wire.read import MAX_TOKEN_COUNT, UntrueCount, malformed, negative
from metis.wire.schema.paths import (
    WILDCARD,
    Getter,
    Path,
    Template,
    compile_path,
    compile_template,
    first,
    getter,
)
from metis.wire.schema.settings import FinishSource, Paths, ResponseSchema, SchemaSettings

TEXT_VARS = ("text",)
IMAGE_VARS = ("media_type", "data", "url")
FILE_VARS = ("media_type", "data", "url")
THINKING_VARS = ("thinking", "signature")
REDACTED_VARS = ("data",)
TOOL_CALL_VARS = ("id", "name", "input", "input_json")
TOOL_RESULT_VARS = ("tool_call_id", "tool_name", "content", "is_error")
TOOL_VARS = ("name", "description", "input_schema")
BODY_VARS = (
    "model",
    "stream",
    "max_output_tokens",
    "temperature",
    "stop_sequences",
    "output_schema",
    "output_schema_name",
    "thinking",
    "thinking_budget",
    "thinking_level",
    "reasoning_effort",
    "top_p",
    "top_k",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "parallel_tool_calls",
    "tools",
    "tool_choice",
)


DetectRule = tuple[str, str | None, str | None, Getter | None, Any]
"""One rule of ``block_detect``: (kind, key present, field key, field getter, value)."""


def detect(rules: list[DetectRule], part: dict[str, Any]) -> str | None:
    """The kind of content ``part`` is: the first rule of ``block_detect`` it matches."""
    for rule_kind, key, field_key, field, value in rules:
        if key is not None and key not in part:
            continue
        if field_key is not None:
            if part.get(field_key) != value:
                continue
        elif field is not None and field(part) != value:
            continue
        return rule_kind
    return None


def _finish_sources(given: str | list[str | FinishSource]) -> list[FinishSource]:
    """``finish_reason_path`` as a list of sources, the first present wins."""
    return [
        s if isinstance(s, FinishSource) else FinishSource(path=s)
        for s in (given if isinstance(given, list) else [given])
    ]


class Reading:
    """A response (or stream) schema with its paths compiled into getters."""

    def __init__(self, schema: ResponseSchema) -> None:
        g = _getter
        self.schema = schema
        self.separate = schema.content_mode == "separate"
        # Paths under one list item (``candidates.0.``) share it: it is looked up once per
        # object (the "envelope"), and those paths are read from it.
        scoped = [schema.content_path, *schema.dropped_fields]
        sources = _finish_sources(schema.finish_reason_path)
        scoped += [source.path for source in sources]
        prefix = _envelope([compile_path(path) for path in scoped])
        self.envelope: Getter | None = getter(prefix) if prefix else None
        self.envelope_path = prefix
        local = self._local
        self.content_path = schema.content_path
        self.content_scoped, self.content = local(schema.content_path)
        self.detect: list[DetectRule] = [
            (kind, rule.key, _key(rule.field), g(rule.field) if rule.field else None, rule.value)
            for kind, rule in schema.block_detect.items()
        ]
        self.text_key = _key(schema.text_value)
        self.lone_text_key = self._lone_text_key()
        self.text_value = g(schema.text_value)
        self.thinking_value = g(schema.thinking_value)
        self.thinking_signature = _opt(schema.thinking_signature)
        self.image = _opt(schema.image_media_type), _opt(schema.image_data)
        self.text_field = g(schema.text_field)
        self.thinking_field = _opt(schema.thinking_field)
        self.tool_calls_field = g(schema.tool_calls_field)
        self.tool_name = g(schema.tool_call_name)
        self.tool_input = g(schema.tool_call_input)
        self.json_input = schema.tool_call_input_format == "json_string"
        self.tool_id = _opt(schema.tool_call_id)
        self.tool_index = _opt(schema.tool_call_index)
        self.response_id = _opt(schema.response_id_path)
        self.model = _opt(schema.model_path)
        self.usage = g(schema.usage_path)
        self.input_tokens = _counter(schema.input_tokens)
        self.output_tokens = _counter(schema.output_tokens)
        self.cached = _counter(schema.cached_input_tokens)
        self.created = _counter(schema.cache_creation_input_tokens)
        self.reasoning = _counter(schema.reasoning_tokens)
        self.service_tier = tuple(schema.service_tier)
        self.modality_counts = schema.modality_counts
        self.finish: list[tuple[bool, Getter, dict[str, StopKind], StopKind]] = [
            (*local(s.path), schema.finish_reasons if s.map is None else s.map, s.default)
            for s in sources
        ]
        self.finish_sources = sources
        self.tool_use_raw = frozenset(schema.finish_reason_tool_use)
        self.no_call_raw = frozenset(schema.finish_reason_no_call)
        self.dropped = [
            (name, *local(name), str(compile_path(name)[-1])) for name in schema.dropped_fields
        ]
        self.dropped_keys = _envelope_keys(schema.dropped_fields, prefix)
        """When every dropped field is one key of the envelope (Gemini's), those keys: a chunk
        whose envelope has none of them is not looked at further (one check per chunk)."""

    def relative(self, path: str) -> tuple[bool, Path]:
        """``path`` compiled, and whether it is under the envelope (then relative to it)."""
        compiled = compile_path(path)
        prefix = self.envelope_path
        if prefix and compiled[: len(prefix)] == prefix:
            return True, compiled[len(prefix) :]
        return False, compiled

    def _local(self, path: str) -> tuple[bool, Getter]:
        """A getter of ``path``, relative to the envelope when it is under it."""
        inside, compiled = self.relative(path)
        return inside, _getter(".".join(map(str, compiled))) if inside else _getter(path)

    def _lone_text_key(self) -> str | None:
        """The text key, when a part holding that key alone is detected as text: the parser
        then reads such a part without the rules (most streamed chunks are one)."""
        key = self.text_key
        if key is None or self.separate:
            return None
        alone = {key: _UNMATCHED}  # a value no rule's field can equal
        for kind, rule_key, field_key, field, value in self.detect:
            if rule_key is not None and rule_key not in alone:
                continue
            if field_key is not None or field is not None:
                got = alone.get(field_key) if field_key is not None else field(alone)  # type: ignore[misc]
                if got != value:
                    continue
            return key if kind == "text" else None
        return None


class _Unmatched:
    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__


_UNMATCHED = _Unmatched()


def _envelope_keys(fields: list[str], prefix: Path | None) -> frozenset[str] | None:
    """The keys ``fields`` are in the envelope at ``prefix``, when each is one key of it."""
    if not prefix:
        return None
    keys: set[str] = set()
    for field in fields:
        path = compile_path(field)
        rest = path[len(prefix) :]
        if path[: len(prefix)] != prefix or len(rest) != 1 or rest[0] == WILDCARD:
            return None
        keys.add(str(rest[0]))
    return frozenset(keys)


def _regex(pattern: str | None, where: str) -> re.Pattern[str] | None:
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise StackError(f"{where}: not a regular expression: {exc}") from None


def _envelope(paths: list[Path]) -> Path | None:
    """A ``key.index`` prefix that at least two of ``paths`` go through, if there is one."""
    prefixes = [p[:2] for p in paths if len(p) > 2 and p[1].__class__ is int and WILDCARD not in p]
    best = max(set(prefixes), key=prefixes.count, default=None)
    return best if best is not None and prefixes.count(best) > 1 else None


def _key(path: str | None) -> str | None:
    """The key, when ``path`` is one key (read with a plain ``dict.get`` on the hot path)."""
    return path if path is not None and "." not in path and path != WILDCARD else None


class Compiled:
    """Everything the codec reads, compiled from :class:`SchemaSettings`."""

    def __init__(self, settings: SchemaSettings) -> None:
        self.settings = settings
        m = settings.message_schema
        self.messages = m
        where = "message_schema"
        t = compile_template
        result = m.tool_result
        self.text = t(m.text_template, TEXT_VARS, f"{where}.text_template")
        self.image = t(m.image_template, IMAGE_VARS, f"{where}.image_template")
        self.image_url = t(m.image_url_template, IMAGE_VARS, f"{where}.image_url_template")
        self.file = t(m.file_template, FILE_VARS, f"{where}.file_template")
        self.file_uri = t(m.file_uri_template, FILE_VARS, f"{where}.file_uri_template")
        self.media_path = compile_path(result.media_path) if result.media_path else None
        self.media_models = _regex(result.media_models, f"{where}.tool_result.media_models")
        self.thinking = t(m.thinking_template, THINKING_VARS, f"{where}.thinking_template")
        self.redacted = t(
            m.redacted_thinking_template, REDACTED_VARS, f"{where}.redacted_thinking_template"
        )
        self.tool_call = t(
            m.tool_call_block_template, TOOL_CALL_VARS, f"{where}.tool_call_block_template"
        )
        for name in ("block_template", "error_template"):
            given = getattr(result, name)
            if result.wrap_mode == "direct" and given is not None and not isinstance(given, dict):
                raise StackError(f"{where}.tool_result.{name}: a direct result is an object")
        self.tool_result = t(
            result.block_template, TOOL_RESULT_VARS, f"{where}.tool_result.block_template"
        )
        self.tool_error = t(
            result.error_template, TOOL_RESULT_VARS, f"{where}.tool_result.error_template"
        )
        self.system_key = compile_path(m.system_prompt.key)
        self.messages_key = compile_path(m.messages_key)
        r = settings.request_schema
        self.body = Template(r.body_template, BODY_VARS, "request_schema.body_template")
        self.tool = Template(r.tool_template, TOOL_VARS, "request_schema.tool_template")
        self.choices: dict[str, Template | None] = {
            kind: t(getattr(r.tool_choice, kind), ("name",), f"request_schema.tool_choice.{kind}")
            for kind in ("auto", "any", "none", "tool")
        }
        self.response = Reading(settings.response_schema)
        merged = {**settings.response_schema.model_dump(exclude_unset=True)}
        merged.update(settings.stream_schema)
        try:
            self.stream = Reading(ResponseSchema.model_validate(merged))
        except ValidationError as exc:
            raise StackError(f"stream_schema: {_explain(exc)}") from None
        e = settings.error_schema
        self.error_path = compile_path(e.path)
        self.error_message = compile_path(e.message)
        self.error_codes = _paths(e.code)
        self.error_retry = None if e.retry_after is None else compile_path(e.retry_after)


def _getter(path: str) -> Getter:
    """A getter for ``path``; with a ``*`` in it, the first match."""
    compiled = compile_path(path)
    if WILDCARD not in compiled:
        return getter(compiled)
    return lambda obj: first(obj, compiled)


def _opt(path: str | None) -> Getter | None:
    return None if path is None else _getter(path)


def _paths(paths: Paths | None) -> list[Path]:
    if paths is None:
        return []
    return [compile_path(p) for p in ([paths] if isinstance(paths, str) else paths)]


Counter = Callable[[dict[str, Any]], int | None]
_A_COUNT = "a token count (a whole number >= 0)"


def _counter(paths: Paths | None) -> Counter:
    """The sum of the token counts at ``paths`` in a usage object (``None``: none there)."""
    compiled = _paths(paths)
    getters = [getter(path) for path in compiled]
    keys = tuple(str(path[0]) for path in compiled if len(path) == 1)

    def count(usage: dict[str, Any]) -> int | None:
        total = None
        for path, get in zip(compiled, getters, strict=True):
            value = get(usage)
            if value is not None:
                if value.__class__ is not int or not 0 <= value <= MAX_TOKEN_COUNT:
                    raise _not_a_count(f"usage.{'.'.join(map(str, path))}", value)
                total = (total or 0) + value
        return total

    def count_keys(usage: dict[str, Any]) -> int | None:
        total = None
        for key in keys:
            value = usage.get(key)
            if value is not None:
                if value.__class__ is not int or not 0 <= value <= MAX_TOKEN_COUNT:
                    raise _not_a_count(f"usage.{key}", value)
                total = (total or 0) + value
        return total

    return count_keys if len(keys) == len(compiled) else count


def _not_a_count(field: str, value: Any) -> Exception:
    return UntrueCount(field, value) if negative(value) else malformed(field, _A_COUNT, value)


def _explain(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'settings'}: {err['msg']}"
        for err in exc.errors()
    )


def load_settings(raw: dict[str, Any]) -> Compiled:
    try:
        settings = SchemaSettings.model_validate(raw)
    except ValidationError as exc:
        raise StackError(f"schema codec settings: {_explain(exc)}") from None
    return Compiled(settings)
