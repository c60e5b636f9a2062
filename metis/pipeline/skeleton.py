"""The fixed skeleton of a provider stack, and the order rules every pipeline is checked by.

A stack is read in zones, outermost first::

    invariants | policies | encode | wire edits | retry | auth steps | telemetry | normalize,
    decode, transport

A provider stack (one that names its ``codec``) lists only its own stages (policies, wire
edits, auth steps) and the skeleton's stages it gives options to; :func:`complete` adds the
rest where they belong. Within a zone, stages keep the order the stack gives them. A stage
whose zone the engine does not know (an application's own) is in the zone of the stage listed
before it, so it goes where it is listed.

:func:`check_order` applies the rules to any list of stages, by the zones of the stages it
has (a pipeline built in code with stages of its own is not constrained by names it lacks),
and raises a StackError naming the rule a wrong order breaks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from metis.errors import StackError

OUTER, POLICY, ENCODE, EDIT, RETRY, AUTH, TELEMETRY, READ, FRAME, SEND = range(10)
ZONE_NAMES = (
    "invariants",
    "policy",
    "encode",
    "wire edit",
    "retry",
    "auth step",
    "telemetry",
    "normalize",
    "decode",
    "transport",
)

ZONES: dict[str, int] = {
    "invariants": OUTER,
    "ollama_lifecycle": POLICY,
    "capability_check": POLICY,
    "system_hoist": POLICY,
    "empty_content": POLICY,
    "tool_result_check": POLICY,
    "tool_ids": POLICY,
    "thinking_filter": POLICY,
    "tool_shim": POLICY,
    "schema_cleanup": POLICY,
    "encode": ENCODE,
    "thinking_turn": EDIT,
    "cache_control": EDIT,
    "strict_schema": EDIT,
    "include_usage": EDIT,
    "wire_fields": EDIT,
    "continuation": EDIT,
    "pre_send_check": EDIT,
    "retry": RETRY,
    "url_params": AUTH,
    "aws_endpoint": AUTH,
    "aws_sigv4": AUTH,
    "google_auth": AUTH,
    "azure_auth": AUTH,
    "telemetry": TELEMETRY,
    "normalize": READ,
    "decode": FRAME,
    "transport": SEND,
    "websocket_transport": SEND,
}
"""The zone of each built-in stage, by name (a stage class may declare its own ``zone``)."""

SKELETON: tuple[tuple[str, int], ...] = (
    ("invariants", OUTER),
    ("encode", ENCODE),
    ("cache_control", EDIT),
    ("pre_send_check", EDIT),
    ("retry", RETRY),
    ("telemetry", TELEMETRY),
    ("normalize", READ),
    ("decode", FRAME),
    ("transport", SEND),
)
"""The stages every provider stack has, added where they belong when a stack leaves them out
(``cache_control``, then ``pre_send_check``, go last among the wire edits)."""

REQUIRED = ("invariants", "tool_ids")
"""Stages a provider stack may not lose (docs/contract.md §2 and §6)."""

RULES: dict[str, str] = {
    "invariants-outermost": "invariants is the outermost stage: it checks exactly what the "
    "application receives",
    "canonical-before-encode": "stages that take the canonical request come before encode",
    "edits-between-encode-and-retry": "wire edits come after encode and before retry: the "
    "body is final, and serialized once, before the first attempt",
    "retry-around-attempts": "auth steps, telemetry and the send path are inside retry: "
    "every attempt is signed, observed and sent afresh",
    "auth-outside-telemetry": "auth steps come before telemetry",
    "send-path-innermost": "normalize, decode and transport are innermost, in that order, "
    "inside telemetry",
    "contract-stages": "a provider stack keeps invariants (docs/contract.md §2) and tool_ids "
    "(docs/contract.md §6)",
}

_RULE_BY_ZONE = {
    OUTER: "invariants-outermost",
    POLICY: "canonical-before-encode",
    ENCODE: "edits-between-encode-and-retry",
    EDIT: "edits-between-encode-and-retry",
    RETRY: "retry-around-attempts",
    AUTH: "auth-outside-telemetry",
    TELEMETRY: "send-path-innermost",
    READ: "send-path-innermost",
    FRAME: "send-path-innermost",
}


def rule_error(rule: str, detail: str, where: str = "") -> StackError:
    prefix = f"{where}: " if where else ""
    return StackError(f"{prefix}{detail}: rule {rule} ({RULES[rule]})")


def zones(names: Sequence[str], zone_of: Callable[[str], int | None]) -> list[int]:
    """Each stage's zone; a stage of unknown zone takes the zone of the one before it."""
    found: list[int] = []
    current = POLICY
    for name in names:
        zone = zone_of(name)
        if zone is not None:
            current = zone
        found.append(current)
    return found


def check_order(
    names: Sequence[str], zone_of: Callable[[str], int | None], where: str = ""
) -> None:
    """Raise a StackError naming the rule when a stage is listed outside one that must be
    outside it."""
    last: tuple[str, int] | None = None
    for name in names:
        zone = zone_of(name)
        if zone is None:
            continue
        if last is not None and zone < last[1]:
            outer_name, outer_zone = last
            detail = (
                f"{outer_name!r} ({ZONE_NAMES[outer_zone]}) is listed before {name!r} "
                f"({ZONE_NAMES[zone]})"
            )
            raise rule_error(_RULE_BY_ZONE[zone], detail, where)
        last = (name, zone)


def complete(
    entries: list[dict[str, Any]], zone_of: Callable[[str], int | None], where: str = ""
) -> tuple[list[dict[str, Any]], list[str]]:
    """A provider stack's stage entries (``{name, options}``) with the skeleton's missing
    stages added at their places, and the names of those added. The listed stages must be
    in zone order already (a StackError naming the rule, if not)."""
    names = [entry["name"] for entry in entries]
    check_order(names, zone_of, where)
    placed = zones(names, zone_of)
    out = list(entries)
    added: list[str] = []
    for name, zone in SKELETON:
        if name in names:
            continue
        if name == "cache_control" and "pre_send_check" in names:  # the check sees it
            at = names.index("pre_send_check")
        elif name in ("cache_control", "pre_send_check"):  # after the wire edits, before retry
            at = next((i for i, z in enumerate(placed) if z > EDIT), len(placed))
        else:
            at = next((i for i, z in enumerate(placed) if z > zone), len(placed))
        out.insert(at, {"name": name, "options": {}})
        placed.insert(at, zone)
        names.insert(at, name)
        added.append(name)
    return out, added


def check_required(names: Sequence[str], where: str = "") -> None:
    missing = [name for name in REQUIRED if name not in names]
    if missing:
        raise rule_error("contract-stages", f"the stack has no {' or '.join(missing)}", where)
