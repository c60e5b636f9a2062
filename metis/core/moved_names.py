"""Names ``metis`` no longer exports as they were: those that moved to :mod:`metis.pipeline`
and those renamed. Each is importable from ``metis`` for one release, with a
DeprecationWarning naming where it is now (``metis.core.lazy_exports.package_getattr``)."""

from __future__ import annotations

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
