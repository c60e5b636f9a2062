"""A session's saving and restoring (docs/sessions.md, "Saving and restoring"): the forms a
:class:`~metis.sessions.Session` has for :mod:`metis.sessions.saved`'s format."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Self

from metis.adapter.adapter import Adapter
from metis.calls.request import ModelLike
from metis.core.options import checked_options
from metis.sessions.context import Compact
from metis.sessions.core import Conversation
from metis.sessions.saved import read_saved, restored, saved_session
from metis.sessions.spending import restored_spending


class SavingForms:
    """``to_dict``, ``to_json`` and ``from_json`` (a Session's)."""

    if TYPE_CHECKING:
        _conversation: Conversation

        def _owned(self, what: str) -> AbstractContextManager[None]: ...

    def to_dict(self) -> dict[str, Any]:
        """The session as JSON-ready data (:mod:`metis.sessions.saved`)."""
        with self._owned("save"):
            saved = saved_session(self._conversation)
        return saved.model_dump(mode="json", exclude_none=True)

    def to_json(self) -> str:
        """The session as JSON text; :meth:`from_json` reads it back, on any worker."""
        with self._owned("save"):
            saved = saved_session(self._conversation)
        return saved.model_dump_json(exclude_none=True)

    @classmethod
    @checked_options  # a misspelt keyword (modle=) says the one meant
    def from_json(
        cls,
        data: str | bytes | dict[str, Any],
        *,
        model: ModelLike | None = None,
        adapters: Mapping[str, Adapter] | None = None,
        tools: Sequence[Any] | None = None,
        compact: Compact = None,
        api_key: str | None = None,
    ) -> Self:
        """A session from :meth:`to_json`'s text: the same id, history, options and provider
        state. Functions are not data: ``tools`` (the session was saved with) and a
        ``compact`` function are given again (``"provider"`` is kept), a router as
        ``model``, and the key as ``api_key`` (or the stack's variable)."""
        saved = read_saved(data)
        chosen, options = restored(saved, model, tools, api_key)
        made: Callable[..., Self] = cls  # Session's constructor, which this mixin does not know
        session = made(
            chosen,
            saved.messages,
            session_id=saved.session_id,
            adapters=adapters,
            compact=compact if compact is not None else saved.compact,
            context_check=saved.context_check,
            **options,
        )
        session._conversation.keeper.state = saved.provider_state
        session._conversation.spending = restored_spending(saved.usage, saved.costs)
        return session
