"""The public surface (docs/api.md): the names users import, one meaning and one place each."""

from __future__ import annotations

import metis
import metis.errors
import metis.registry
from metis.errors import AdapterError, AuthError, ConfigError, ErrorClass, NotConfiguredError


def test_not_configured_is_an_auth_error_of_the_taxonomy() -> None:
    error = NotConfiguredError("no key", model="m:x", adapter="anthropic", api_key_env="K")
    assert isinstance(error, AuthError) and isinstance(error, AdapterError)
    assert error.error_class is ErrorClass.AUTH and not error.retryable
    assert (error.provider, error.adapter, error.model, error.api_key_env) == (
        "anthropic",
        "anthropic",
        "m:x",
        "K",
    )
    assert isinstance(error, ConfigError)  # what it was; kept for one release
    assert metis.NotConfiguredError is metis.registry.NotConfiguredError is NotConfiguredError
