"""The engine, and the names for extending it: writing a stage, registering it, loading a
stack (docs/stages.md, docs/stacks.md). ``metis`` holds the names for using metis.

Names are imported on first use: importing a module of this package (``metis.pipeline.call``)
loads nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "Call": "metis.pipeline.call",
    "Inner": "metis.pipeline.stage",
    "Pipeline": "metis.pipeline.pipeline",
    "RequestStage": "metis.pipeline.stage",
    "ResponseHead": "metis.pipeline.request",
    "Stage": "metis.pipeline.stage",
    "StageServices": "metis.pipeline.services",
    "WireRequest": "metis.pipeline.request",
    "load_stack": "metis.stacks.loader",
    "register_stage": "metis.pipeline.registry",
}
"""Every public name of ``metis.pipeline``, and the module it is imported from on first use."""

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'metis.pipeline' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from metis.pipeline.call import Call as Call
    from metis.pipeline.pipeline import Pipeline as Pipeline
    from metis.pipeline.registry import register_stage as register_stage
    from metis.pipeline.request import ResponseHead as ResponseHead
    from metis.pipeline.request import WireRequest as WireRequest
    from metis.pipeline.services import StageServices as StageServices
    from metis.pipeline.stage import Inner as Inner
    from metis.pipeline.stage import RequestStage as RequestStage
    from metis.pipeline.stage import Stage as Stage
    from metis.stacks.loader import load_stack as load_stack
