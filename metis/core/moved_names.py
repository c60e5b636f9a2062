"""Names ``metis`` no longer exports as they were: those that moved to :mod:`metis.pipeline`
and those renamed. Each is importable from ``metis`` for one release, with a
DeprecationWarning naming where it is now."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from metis.core.deprecation import warn_deprecated

MOVED: dict[str, str] = {
    **dict.fromkeys(
        [
            "Call",
            "Inner",
            "Pipeline",
            "RequestStage",
            "ResponseHead",
            "Stage",
            "StageServices",
            "WireRequest",
            "load_stack",
            "register_stage",
        ],
        "metis.pipeline",
    ),
}
"""Names that moved, and the module they are in now."""
RENAMED = {"Route": "ModelRoute"}
"""Names that were renamed, and their names now."""


def is_old(name: str) -> bool:
    return name in MOVED or name in RENAMED


def old_name(name: str, current: Callable[[str], Any]) -> Any:
    """What old ``name`` is now, with the warning; ``current`` reads a name of ``metis``."""
    if name in MOVED:
        warn_deprecated(f"metis.{name}", f"{MOVED[name]}.{name}")
        return getattr(importlib.import_module(MOVED[name]), name)
    warn_deprecated(f"metis.{name}", f"metis.{RENAMED[name]}")
    return current(RENAMED[name])
