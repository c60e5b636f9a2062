"""metis.core.lazy_exports: a package's names imported when first read."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from metis.core.lazy_exports import lazy_exports


def test_a_name_is_imported_when_first_read_and_kept() -> None:
    namespace: dict[str, Any] = {}
    load, names = lazy_exports("pkg", {"dedent": "textwrap"}, namespace)
    assert "dedent" not in namespace
    value = load("dedent")
    assert value is sys.modules["textwrap"].dedent
    assert namespace["dedent"] is value
    assert names() == ["dedent"]


def test_an_unknown_name_is_an_attribute_error_naming_the_package() -> None:
    load, _ = lazy_exports("pkg", {}, {})
    with pytest.raises(AttributeError, match="module 'pkg' has no attribute 'nope'"):
        load("nope")


def test_a_misspelt_name_is_an_attribute_error_naming_the_nearest() -> None:
    import metis

    with pytest.raises(AttributeError, match="has no attribute 'Sesion'; did you mean 'Session'"):
        metis.Sesion  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(AttributeError) as private:
        metis._nope  # type: ignore[attr-defined]  # noqa: B018
    assert "did you mean" not in str(private.value)
