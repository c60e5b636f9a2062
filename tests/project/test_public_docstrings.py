"""What an IDE shows on hover: every public name of ``metis`` (and of the packages a user
imports from: histories, routing, pipeline), and each public method or property their classes
define, has a docstring (``Message.user`` and ``ToolChoice.any`` had none)."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator
from typing import Any

import pytest

PACKAGES = ("metis", "metis.histories", "metis.routing", "metis.pipeline")


def _public_names() -> Iterator[tuple[str, Any]]:
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            yield f"{package}.{name}", getattr(module, name)


def _undocumented_members(cls: type) -> Iterator[str]:
    """Public functions and properties a metis class defines (or inherits from one) that
    have no docstring of their own nor from a class they override."""
    seen: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("metis"):
            continue
        for name, raw in vars(klass).items():
            if name.startswith("_") or name in seen or name == "model_post_init":
                continue
            seen.add(name)
            target = raw.__func__ if isinstance(raw, classmethod | staticmethod) else raw
            if not (isinstance(target, property) or inspect.isfunction(target)):
                continue
            if target.__doc__ is None and not inspect.getdoc(getattr(cls, name)):
                yield f"{klass.__module__}.{klass.__qualname__}.{name}"


def test_every_public_name_and_member_has_a_docstring() -> None:
    missing: set[str] = set()
    for qualified, value in _public_names():
        if not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        if not inspect.getdoc(value):
            missing.add(qualified)
        if inspect.isclass(value):
            missing.update(_undocumented_members(value))
    assert sorted(missing) == []


@pytest.mark.parametrize("name", ["user", "assistant", "system", "tool"])
def test_a_messages_constructors_say_what_they_make(name: str) -> None:
    import metis

    assert inspect.getdoc(getattr(metis.Message, name))


def test_help_of_metis_says_where_to_start() -> None:
    """``help(metis)`` showed only that names are imported lazily."""
    import metis

    doc = metis.__doc__ or ""
    for start in ("metis.complete(", "metis.Session(", "@metis.tool", "AdapterError"):
        assert start in doc
