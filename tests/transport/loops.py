"""What the transport tests that run on both event loops share: the runner's type and a client
over metis's own transport (the ``run`` fixture, asyncio and uvloop, is in conftest.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from metis.transport.http1 import LeanTransport

Runner = Callable[[Awaitable[Any]], Any]


def lean_client(**limits: Any) -> httpx.AsyncClient:
    """A client over the lean transport, with ``httpx.Limits(**limits)``."""
    return httpx.AsyncClient(transport=LeanTransport(limits=httpx.Limits(**limits)), timeout=5.0)
