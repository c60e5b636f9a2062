"""What the Gemini API refuses with a 400 (``INVALID_ARGUMENT``): its table
(``tables/gemini.yaml``) and the checks it names. Field names
are read in either proto-JSON spelling (``functionCall`` / ``function_call``): a request is
:func:`normalized` to camelCase before the rules read it.
"""

from __future__ import annotations

import re
from typing import Any

from metis.testing.emulator.formats import files_rules
from metis.testing.emulator.formats.knobs_rules import check_gemini
from metis.testing.emulator.rules import LOADED, MISSING, Refused, first, table
from metis.testing.emulator.wire import sealed
from metis.wire.rules import gemini_part_data, gemini_turns, turn_kind

SIGNATURE_KIND = "gemini-thought"
BYPASS = "skip_thought_signature_validator"  # Google's documented value for foreign histories
FIELD = 'Invalid JSON payload received. Unknown name "{value}"{at}: Cannot find field.'


def camel(value: Any) -> Any:
    """A dict with its keys in camelCase (not recursive)."""
    if not isinstance(value, dict):
        return value
    return {re.sub(r"_([a-z])", lambda m: m.group(1).upper(), k): v for k, v in value.items()}


def normalized(body: dict[str, Any]) -> dict[str, Any]:
    """The request with its structural keys in camelCase (schemas, arguments and function
    responses are the caller's own data and are left alone)."""
    out: dict[str, Any] = camel(body)
    config = camel(out.get("generationConfig"))
    if isinstance(config, dict):
        out["generationConfig"] = (
            {**config, "thinkingConfig": camel(config.get("thinkingConfig"))}
            if "thinkingConfig" in config
            else config
        )
    calling = camel(out.get("toolConfig"))
    if isinstance(calling, dict) and "functionCallingConfig" in calling:
        out["toolConfig"] = {
            **calling,
            "functionCallingConfig": camel(calling["functionCallingConfig"]),
        }
    if isinstance(out.get("tools"), list):
        out["tools"] = [_tool(camel(t)) for t in out["tools"]]
    if isinstance(out.get("contents"), list):
        out["contents"] = [_content(camel(c)) for c in out["contents"]]
    if isinstance(out.get("systemInstruction"), dict):
        out["systemInstruction"] = _content(camel(out["systemInstruction"]))
    return out


def _tool(tool: Any) -> Any:
    if isinstance(tool, dict) and isinstance(tool.get("functionDeclarations"), list):
        return {**tool, "functionDeclarations": [camel(d) for d in tool["functionDeclarations"]]}
    return tool


def _content(content: Any) -> Any:
    if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
        return content
    parts = []
    for part in content["parts"]:
        part = camel(part)
        for key in ("functionCall", "functionResponse"):
            if isinstance(part, dict) and key in part:
                part = {**part, key: camel(part[key])}
        parts.append(part)
    return {**content, "parts": parts}


def _check_parameter_schemas(body: dict[str, Any], call: Any) -> None:
    """``parameters`` is Gemini's OpenAPI subset (``parametersJsonSchema`` takes JSON Schema)."""
    for i, tool in enumerate(body.get("tools") or []):
        for j, declaration in enumerate(tool.get("functionDeclarations") or []):
            where = f"tools[{i}].function_declarations[{j}].parameters"
            _schema_keys(declaration.get("parameters"), where)


def _schema_keys(schema: Any, where: str) -> None:
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        if key not in LOADED["gemini"].choices("schema keys"):
            raise Refused(FIELD.format(value=key, at=f" at '{where}'"))
        subs = value.items() if key == "properties" and isinstance(value, dict) else []
        subs = [*subs, *(("items", value),)] if key == "items" else subs
        subs = (
            [*subs, *((f"anyOf[{n}]", v) for n, v in enumerate(value))]
            if key == "anyOf" and isinstance(value, list)
            else subs
        )
        for name, sub in subs:
            _schema_keys(sub, f"{where}.{'properties.' if key == 'properties' else ''}{name}")


def _check_signatures(body: dict[str, Any], call: Any) -> None:
    """Gemini 3: the first function call of each step of the current turn (after the last user
    text) carries a thought signature this emulator issued, or the documented bypass."""
    model = call.model if call is not None else ""
    if not model.startswith("gemini-3"):
        return
    contents = body["contents"]
    start = max(
        (
            i + 1
            for i, c in enumerate(contents)
            if turn_kind(c.get("role"), c["parts"]) == "user"
            and any("text" in p for p in c["parts"])
        ),
        default=0,
    )
    for i, content in enumerate(contents[start:], start):
        first = next((p for p in content["parts"] if "functionCall" in p), None)
        sig = first.get("thoughtSignature") if first else MISSING
        if first is not None and not sig:
            raise Refused(
                "Function call is missing a thought_signature in functionCall parts. This is "
                "required for tools to work correctly, and missing thought_signature may lead to "
                "degraded model performance. Additional data, function call "
                f"`default_api:{first['functionCall']['name']}` , position {i + 1}. Please refer "
                "to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
            )
        if (
            first is not None
            and call.env.strict_signatures
            and sig != BYPASS
            and not sealed(SIGNATURE_KIND, str(sig))
        ):
            raise Refused(f"Thought signature is not valid (contents[{i}]).")


RULES = table(
    "gemini",
    {
        "parameter schemas": _check_parameter_schemas,
        "data": first(lambda body: gemini_part_data(body["contents"])),
        "files": files_rules.gemini,
        "thought signatures": _check_signatures,
        "turns": first(lambda body: gemini_turns(body["contents"])),
        "model settings": check_gemini,
    },
)
