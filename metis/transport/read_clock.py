"""The clock of one exchange's reads (metis/transport/exchange.py): when each wait ends."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import anyio


@dataclass(slots=True)
class ReadClock:
    """When each wait of one exchange must end, on anyio's clock."""

    deadline: float
    """The whole call's end (``Call.deadline``)."""
    idle: float
    first_by: float
    """When the first body bytes are due."""
    streamed: bool
    head_arrived: bool = False
    received: bool = False
    now: Callable[[], float] = anyio.current_time  # or loop_clock()'s: the same, looked up once

    def head_by(self) -> float:
        return self.first_by if self.streamed else self.deadline

    def on_head(self) -> None:
        self.head_arrived = True
        if not self.streamed:
            self.first_by = min(self.deadline, self.now() + self.idle)

    def read_by(self) -> float:
        if self.received:
            return min(self.deadline, self.now() + self.idle)
        return self.first_by

    def seconds_for_read(self) -> float:
        now = self.now()
        by = min(self.deadline, now + self.idle) if self.received else self.first_by
        return max(0.0, by - now)


def loop_clock() -> Callable[[], float]:
    """``anyio.current_time``, the loop found once: asyncio's ``loop.time`` (what anyio
    reads, after asking which loop runs on each call), or anyio's own (trio)."""
    try:
        return asyncio.get_running_loop().time
    except RuntimeError:
        return anyio.current_time
