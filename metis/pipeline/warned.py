"""Which lossy-projection warnings a session has already been given.

A conversation is sent again, whole, on every turn, so a block one provider cannot take is
dropped again on every later turn. The WARN record says so once per session; later calls still
list the drop with their result, marked ``repeated``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable


class SessionWarnings:
    """A process-local record of the warnings given, for the ``max_sessions`` most recently
    active sessions (a forgotten session is warned again, which loses nothing)."""

    def __init__(self, max_sessions: int = 10_000, max_per_session: int = 1_000) -> None:
        self.max_sessions = max_sessions
        self.max_per_session = max_per_session
        self._sessions: OrderedDict[str, OrderedDict[Hashable, str]] = OrderedDict()

    def first_time(self, session_id: str, key: Hashable, request_id: str) -> bool:
        """True unless an earlier call of the session already gave this warning (a call may
        give the same one several times: several blocks of one kind in one reply)."""
        seen = self._sessions.get(session_id)
        if seen is None:
            seen = self._sessions[session_id] = OrderedDict()
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(session_id)
        first_by = seen.setdefault(key, request_id)
        if len(seen) > self.max_per_session:
            seen.popitem(last=False)
        return first_by == request_id

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def clear(self) -> None:
        self._sessions.clear()


session_warnings = SessionWarnings()
"""The default record, shared by every adapter in the process."""
