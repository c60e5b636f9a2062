"""The clock of the Redis server, for the scripts that keep times every worker shares.

Each worker's own wall clock may be set differently (a machine an hour ahead, an NTP step):
a cool-down, a bucket's refill or a lease stamped by one would mean another time to the
rest. A script reads the server's ``TIME`` instead, unless the caller gave a time (a test's
clock): :data:`NOW` defines ``clock_now(given)`` for the script that starts with it. What is
decided outside a script by the time reads :class:`ServerWall`, the same clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

NOW = """
local function clock_now(given)
  local now = tonumber(given)
  if now then return now end
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
"""
"""Lua: ``clock_now(ARGV[i])``, the given time, or the server's when it is empty."""


def given_time(clock: Callable[[], float] | None) -> str:
    """The time a script is given: ``clock``'s, or empty for the server's own."""
    return "" if clock is None else repr(clock())


WALL_REFRESH_SECONDS = 60.0
"""How long :class:`ServerWall` keeps the server's time it read as an offset of this process's
clock before it asks again (one ``TIME`` a minute, not one a request)."""


class ServerWall:
    """The Redis server's wall clock, for what is decided outside a script by the time (a
    gateway key's budget period: docs/gateway.md), so that every process naming the server
    keeps the same time whatever its own clock says: ``TIME`` read, kept as its offset from
    ``local`` (this process's Unix time) and read again every :data:`WALL_REFRESH_SECONDS`
    (``steady``'s). A server that does not answer leaves the offset as it was (none yet: this
    process's own time), as what then needs the server fails on its own."""

    def __init__(
        self,
        client: Any,
        local: Callable[[], float] = time.time,
        steady: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client, self.local, self.steady = client, local, steady
        self._offset = 0.0
        self._read_at: float | None = None

    async def now(self) -> float:
        """The server's Unix time now (as last read, moved on by this process's clock)."""
        if self._read_at is None or self.steady() - self._read_at >= WALL_REFRESH_SECONDS:
            await self._read()
        return self.local() + self._offset

    async def _read(self) -> None:
        before = self.local()
        try:
            said = await self.client.time()
        except Exception:  # the caller's own command to the server says what is wrong
            return
        after = self.local()
        server = said.timestamp() if isinstance(said, datetime) else float(said)
        self._offset, self._read_at = server - (before + after) / 2, self.steady()
