"""The base of every canonical object: frozen, built on first use, and refusing an unknown
field (docs/contract.md §14)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from metis.core.model_fields import with_hints


class Canonical(BaseModel):
    """A canonical object. A field it does not have is a ``ValidationError`` naming the field
    and the nearest it has (``temprature``: ``did you mean 'temperature'?``), never dropped."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    def __init__(self, /, **data: Any) -> None:
        __tracebackhide__ = True
        try:
            self.__pydantic_validator__.validate_python(data, self_instance=self)
        except ValidationError as exc:
            raise with_hints(exc, type(self)) from None

    # pydantic's own __init__ in all but its error: a nested object given as a dict is still
    # validated in pydantic's core, never through this method.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]
