"""What a gateway process builds before it serves, taken out of the cyclic collector's reach
(docs/gateway.md, "Beside LiteLLM's proxy"): it lives as long as the process, so no full
collection should walk it again."""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable

from starlette.applications import Starlette

from metis.errors import AdapterError
from metis.gateway.collector import Collector
from metis.gateway.front import GatewayApp
from metis.gateway.service import Gateway
from metis.model.base import Canonical

log = logging.getLogger("metis.gateway")
_USER_SAYS_HELLO = {"max_tokens": 16, "messages": [{"role": "user", "content": "Hello"}]}
SAMPLES = {
    "anthropic": _USER_SAYS_HELLO,
    "chat": _USER_SAYS_HELLO,
    "responses": {"max_output_tokens": 16, "input": "Hello"},
}
"""A small request in each API, read as a first request would be (before serving)."""


def frozen_for_serving(app: Starlette) -> Starlette:
    """``app`` as a server process runs it: what exists by now (modules, the catalog, the
    configuration; about 80,000 objects) lives as long as the process, so it is taken out of
    the cyclic collector's reach (``gc.freeze``) instead of walked again by each full
    collection. Its lifespan, before it is ready, builds what a first request would
    (:func:`warm`) and freezes that too."""
    app.state.serving = True
    frozen()
    return app


def frozen() -> None:
    """Everything alive now, out of the cyclic collector's reach for good."""
    gc.collect()
    gc.freeze()


async def readied(gateway: Gateway, app: Starlette) -> Callable[[], None]:
    """What a served application does before it is ready: :func:`warm`, :func:`frozen`, and
    its collector's passes run between first bytes from then on (metis.gateway.collector).
    What turns the automatic passes on again, at the lifespan's end."""
    await warm(gateway)
    frozen()
    collector = app.collector if isinstance(app, GatewayApp) else Collector()
    collector.serving()
    return collector.stopped


async def warm(gateway: Gateway) -> None:
    """What a first request builds, built before serving: each served model's adapter and
    stages (metis.gateway.models.ModelTable.warm), every canonical model's validator
    (pydantic builds each on first use; all of them, ~40 ms of CPU), and what
    reading a small request in each API makes on its first use."""
    served = gateway.models.warm()
    for model in _canonical_models(Canonical):
        if not model.__pydantic_complete__:
            model.model_rebuild()
    for api, sample in SAMPLES.items():
        for name in served[:1]:
            try:
                await gateway.prepare(api, {**sample, "model": name}, "")
            except AdapterError as exc:  # the model's own refusal: nothing more to build
                log.debug("gateway warm-up of %s: %s", api, exc)


def _canonical_models(base: type[Canonical]) -> list[type[Canonical]]:
    found, todo = [], [base]
    while todo:
        model = todo.pop()
        found.append(model)
        todo.extend(model.__subclasses__())
    return found
