"""The suite's bytecode is cached whatever ``PYTHONDONTWRITEBYTECODE`` says (tests/bytecode.py),
the plugins pytest rewrites as it starts included."""

from __future__ import annotations

import os
from pathlib import Path

import anyio.pytest_plugin
import pytest
from _pytest.assertion.rewrite import PYC_TAIL


def test_a_plugin_pytest_rewrote_as_it_started_is_cached(request: pytest.FixtureRequest) -> None:
    """anyio's plugin is imported before any conftest: with PYTHONDONTWRITEBYTECODE set, its
    rewritten module was never written, and each process rewrote it (and ~45 more) again."""
    assert request.config.pluginmanager.has_plugin("tests.bytecode")
    source = Path(anyio.pytest_plugin.__file__)
    cached = source.parent / "__pycache__" / (source.stem + PYC_TAIL)
    if not os.access(cached.parent, os.W_OK):
        pytest.skip(f"{cached.parent} is read-only: nothing can be cached there")
    assert cached.is_file()
