"""A model of the library's own with some fields changed, made without pydantic's generic copy.

``model.model_copy(update=...)`` copies the instance's dictionary, its extra fields and its
set of fields given through ``copy.copy`` (a dispatch each) and checks the model's ``extra``
setting on every call; a request step that gives a history's tool blocks the provider's ids
makes dozens of such copies a call. :func:`updated` makes the same copy directly: nothing is
validated, as with ``model_copy``.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_set = object.__setattr__


def updated(model: M, **changes: Any) -> M:
    """``model.model_copy(update=changes)``, for fields ``model`` declares (anything else, or
    a model with extra fields or private attributes, goes through ``model_copy`` itself)."""
    cls = model.__class__
    if (
        model.__pydantic_extra__ is not None
        or model.__pydantic_private__ is not None
        or not changes.keys() <= cls.__pydantic_fields__.keys()
    ):
        return model.model_copy(update=changes)
    copied = cls.__new__(cls)
    values = model.__dict__.copy()
    values.update(changes)
    _set(copied, "__dict__", values)
    _set(copied, "__pydantic_extra__", None)
    _set(copied, "__pydantic_fields_set__", model.__pydantic_fields_set__ | changes.keys())
    _set(copied, "__pydantic_private__", None)
    return copied
