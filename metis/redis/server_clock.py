"""The clock of the Redis server, for the scripts that keep times every worker shares.

Each worker's own wall clock may be set differently (a machine an hour ahead, an NTP step):
a cool-down, a bucket's refill or a lease stamped by one would mean another time to the
rest. A script reads the server's ``TIME`` instead, unless the caller gave a time (a test's
clock): :data:`NOW` defines ``clock_now(given)`` for the script that starts with it.
"""

from __future__ import annotations

from collections.abc import Callable

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
