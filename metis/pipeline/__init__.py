"""The engine, and the names for extending it: writing a stage, registering it, loading a
stack (docs/stages.md, docs/stacks.md). ``metis`` holds the names for using metis.

Names are imported on first use: importing a module of this package (``metis.pipeline.call``)
loads nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metis.core.lazy_exports import lazy_exports

_EXPORTS: dict[str, str] = {
    "AsyncRequestStage": "metis.pipeline.stage",
    "Call": "metis.pipeline.call",
    "EventHook": "metis.pipeline.hooks",
    "Inner": "metis.pipeline.stage",
    "Pipeline": "metis.pipeline.pipeline",
    "RequestStage": "metis.pipeline.stage",
    "ProviderSettings": "metis.pipeline.settings",
    "ResponseHead": "metis.pipeline.request",
    "Stage": "metis.pipeline.stage",
    "StageServices": "metis.pipeline.services",
    "Watch": "metis.pipeline.hooks",
    "WireRequest": "metis.pipeline.request",
    "load_stack": "metis.stacks.loader",
    "register_settings": "metis.pipeline.settings",
    "register_stage": "metis.pipeline.registry",
}
"""Every public name of ``metis.pipeline``, and the module it is imported from on first use."""

__all__ = sorted(_EXPORTS)


_load, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
if not TYPE_CHECKING:  # to a type checker only the names imported below exist
    __getattr__ = _load


if TYPE_CHECKING:
    from metis.pipeline.call import Call as Call
    from metis.pipeline.hooks import EventHook as EventHook
    from metis.pipeline.hooks import Watch as Watch
    from metis.pipeline.pipeline import Pipeline as Pipeline
    from metis.pipeline.registry import register_stage as register_stage
    from metis.pipeline.request import ResponseHead as ResponseHead
    from metis.pipeline.request import WireRequest as WireRequest
    from metis.pipeline.services import StageServices as StageServices
    from metis.pipeline.settings import ProviderSettings as ProviderSettings
    from metis.pipeline.settings import register_settings as register_settings
    from metis.pipeline.stage import AsyncRequestStage as AsyncRequestStage
    from metis.pipeline.stage import Inner as Inner
    from metis.pipeline.stage import RequestStage as RequestStage
    from metis.pipeline.stage import Stage as Stage
    from metis.stacks.loader import load_stack as load_stack
