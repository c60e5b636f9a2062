"""What a stack's built-in stages declare without their code, and when a pipeline can wait.

Building an adapter must refuse a broken stack, but it need not load what a call runs: the
stages' code, the canonical model they work with, the codec. For a stack made of built-in
stages whose options models live apart from their code (metis/stages/options.py),
:func:`checked_without_code` makes every check building the pipeline would make (each
stage's options, the codec's name and settings, the skeleton complete, one transport,
innermost); the adapter then builds its pipeline on first use. Any other stack (a stage of
the application's, options a built-in takes only through its own class, a stage missing) is
built at once, as before, so what fails there fails when the adapter is built.

Why the stages' types need no check here: every built-in stage takes and yields the same
types as the others of its zone (tests/stacks/test_deferred.py holds each declaration to its
class), the order rules have put the zones in order, and the skeleton's stages are all there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel, ValidationError

from metis.errors import AdapterError
from metis.pipeline.skeleton import SKELETON
from metis.stages import options as stage_options
from metis.wire.codec import check_codec_settings, is_codec

if TYPE_CHECKING:
    from metis.pipeline.registry import StageRegistry


class Declared(NamedTuple):
    """A built-in stage, as a stack is checked by it."""

    options: type[BaseModel] | None = None
    """Its options model; None: it takes its defaults (a stack giving it options has it built
    at once, its own class checking them)."""
    dialect_option: str | None = None
    dialect: Callable[[dict[str, Any]], str | None] | None = None


_CODEC = Declared(stage_options.CodecOptions, "codec", stage_options.codec_dialect)

DECLARED: dict[str, Declared] = {
    "invariants": Declared(),
    "ollama_lifecycle": Declared(),
    "capability_check": Declared(),
    "system_hoist": Declared(),
    "empty_content": Declared(),
    "tool_result_check": Declared(),
    "tool_ids": Declared(stage_options.ToolIdsOptions),
    "thinking_filter": Declared(stage_options.ThinkingFilterOptions),
    "schema_cleanup": Declared(stage_options.SchemaCleanupOptions),
    "encode": _CODEC,
    "thinking_turn": Declared(),
    "strict_schema": Declared(stage_options.StrictSchemaOptions),
    "include_usage": Declared(),
    "wire_fields": Declared(stage_options.WireFieldsOptions),
    "continuation": Declared(),
    "cache_control": Declared(
        stage_options.CacheControlOptions, "rules", stage_options.rules_dialect
    ),
    "pre_send_check": Declared(
        stage_options.PreSendCheckOptions, "rules", stage_options.rules_dialect
    ),
    "retry": Declared(),
    "telemetry": Declared(),
    "normalize": _CODEC,
    "decode": Declared(stage_options.DecodeOptions),
    "transport": Declared(),
}
"""The built-in stages a pipeline may be deferred with (the rest are built at once)."""

_SKELETON_NAMES = frozenset(name for name, _ in SKELETON)

CONTINUING_CODECS = frozenset({"openai_responses"})
"""The codecs whose items ``continuation`` reads (``output_items``): it is bound to the
stack's codec, and refuses any other."""


_PACKAGED_SETTINGS: list[tuple[str, dict[str, Any]]] = []
"""The codec settings of the built-in stack files parsed so far, by codec: package data that
tests/stacks/test_deferred.py holds valid, so a stack giving the same settings has them
checked by its codec when its pipeline is first used (Gemini's schema settings models are
~8 ms of CPU to build); any other settings are checked when the adapter is built."""


def packaged_settings(codec: Any, settings: Any) -> None:
    """Note a built-in stack file's ``codec`` and ``codec_settings`` (as the file gives them)."""
    if isinstance(codec, str) and isinstance(settings, dict) and settings:
        _PACKAGED_SETTINGS.append((codec, settings))


def declared(name: str, registry: StageRegistry) -> Declared | None:
    """``name``'s declaration, if it is a built-in of ``registry`` that has one."""
    return DECLARED.get(name) if registry.is_builtin(name) else None


def checked_without_code(entries: Sequence[Any], registry: StageRegistry) -> bool:
    """True when building these stage entries (``name`` and ``options`` each) cannot fail, as
    far as the checks above reach: their pipeline may wait for its first use."""
    names = [entry.name for entry in entries]
    if not names or names[-1] != "transport" or len(set(names)) != len(names):
        return False
    if not set(names) >= _SKELETON_NAMES:
        return False
    for entry in entries:
        found = declared(entry.name, registry)
        if found is None or (found.options is None and entry.options):
            return False
        if found.options is not None and not _valid(found.options, entry.options):
            return False
        if found is _CODEC and not _codec_builds(entry.options):
            return False
    if "continuation" in names:
        codecs = {e.options.get("codec") for e in entries if declared(e.name, registry) is _CODEC}
        return codecs <= CONTINUING_CODECS
    return True


def _valid(model: type[BaseModel], options: dict[str, Any]) -> bool:
    try:
        model.model_validate(options)
    except ValidationError:
        return False
    return True


def _codec_builds(options: dict[str, Any]) -> bool:
    """The codec is one metis has, and takes the settings given (checked by the codec's own
    settings check where it has one, else by building it: its module loads now), unless they
    are a built-in stack's."""
    name, settings = options.get("codec"), options.get("settings")
    if not isinstance(name, str) or not is_codec(name):
        return False
    if settings and (name, settings) not in _PACKAGED_SETTINGS:
        try:
            check_codec_settings(name, settings)
        except (AdapterError, ValidationError, TypeError, ValueError):
            return False
    return True
