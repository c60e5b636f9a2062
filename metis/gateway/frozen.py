"""What a gateway process builds before it serves, taken out of the cyclic collector's reach
(docs/gateway.md, "Beside LiteLLM's proxy"): it lives as long as the process, so no full
collection should walk it again."""

from __future__ import annotations

import gc

from starlette.applications import Starlette


def frozen_for_serving(app: Starlette) -> Starlette:
    """``app`` as a server process runs it: what exists by now (modules, the catalog, the
    configuration; about 80,000 objects) lives as long as the process, so it is taken out of
    the cyclic collector's reach (``gc.freeze``) instead of walked again by each full
    collection. Its lifespan, before it is ready, builds what a first request would (each
    served model's adapter and stages, their modules; metis.gateway.models.ModelTable.warm)
    and freezes that too."""
    app.state.serving = True
    frozen()
    return app


def frozen() -> None:
    """Everything alive now, out of the cyclic collector's reach for good."""
    gc.collect()
    gc.freeze()
