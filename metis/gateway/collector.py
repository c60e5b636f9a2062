"""The cyclic collector of a serving process, run between first bytes (docs/gateway.md,
"Beside LiteLLM's proxy").

Left to itself the collector runs a pass whenever the allocation count crosses its
threshold, which in a gateway is most often while a request is read, checked and sent: that
request's first byte waits for the pass, and its wait is the tail of the first-byte latency
(benchmarks/README.md, "Results, 2026-11-30 (gwtail)"). While ``metis serve`` serves, the
automatic collector is off and :class:`Collector` runs the same passes (the same
generations, on the same thresholds) itself, once no model call is between its arrival and
its answer. When model calls overlap so that none ever is, a pass runs as a call arrives once
the count is ``CEILING`` times the threshold, so the memory held in cycles stays bounded; a
request of another kind (a health check, a path not served) runs a due pass as it arrives
when no model call waits.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable

from metis.gateway.ahead import soon

CEILING = 10
"""How many times the first generation's threshold the count may reach while model calls
keep overlapping, before a pass runs in front of one."""

TICK_SECONDS = 1.0
"""How often a serving process checks for a due pass whatever its requests do."""


class Collector:
    """Counts the model calls waiting for their answer, and runs the collector's passes when
    none is, once :meth:`serving` has turned the automatic passes off."""

    __slots__ = ("_collect", "_counts", "_tick", "_young", "active", "thresholds", "waiting")

    def __init__(
        self,
        counts: Callable[[], tuple[int, int, int]] = gc.get_count,
        collect: Callable[[int], object] = gc.collect,
    ) -> None:
        self._counts = counts
        self._collect = collect
        self.active = False
        self.waiting = 0
        self.thresholds = gc.get_threshold()
        self._young = self.thresholds[0]
        self._tick: asyncio.TimerHandle | None = None

    def serving(self) -> None:
        """The automatic passes off; this collector runs them from now on (called in the
        serving loop: its timer checks every ``TICK_SECONDS``)."""
        if gc.isenabled():
            self.thresholds = gc.get_threshold()
            self._young = self.thresholds[0]
            gc.disable()
            self.active = True
            self.ticked()

    def stopped(self) -> None:
        """The automatic passes on again (the application's lifespan has ended)."""
        if self.active:
            self.active = False
            gc.enable()
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None

    def ticked(self) -> None:
        """The timer's check: a due pass if no model call waits, or in front of them past
        the ceiling; then the next check."""
        if not self.active:
            return
        if not self.waiting:
            self.collect()
        elif self._counts()[0] >= self._young * CEILING:
            self.collect(True)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not in an asyncio loop (metis serve always is): no timer
            return
        self._tick = loop.call_later(TICK_SECONDS, self.ticked)

    def arrived(self) -> None:
        """A model call arrived: it waits for its answer from now on."""
        self.waiting += 1
        if self.active and self._counts()[0] >= self._young * CEILING:
            self.collect(True)

    def answered(self) -> None:
        """A model call has its answer (its first bytes are written next, in the same step):
        a pass that is due runs once the step is over, if no other call is waiting then."""
        self.waiting -= 1
        if self.active and not self.waiting and self._counts()[0] >= self._young:
            soon(self.collect)

    def aside(self) -> None:
        """Another request (not a model call) arrived: a pass that is due runs now if no
        model call waits, so a process asked nothing else still collects its cycles."""
        if self.active and not self.waiting:
            self.collect()

    def collect(self, anyway: bool = False) -> None:
        """The pass that is due, if one is and no model call waits (or ``anyway``): the oldest
        generation whose count is over its threshold, as the automatic collector chooses
        (without its check of how much a full pass would find, which it cannot be asked)."""
        counts = self._counts()
        if counts[0] < self._young or (self.waiting and not anyway):
            return
        _, second, oldest = self.thresholds
        generation = 2 if counts[2] > oldest else 1 if counts[1] > second else 0
        self._collect(generation)
