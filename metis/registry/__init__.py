"""models.yaml -> model routes and adapters; the code lives in :mod:`metis.registry.registry`
(entries and the file schema beside it)."""

from typing import TYPE_CHECKING

from metis.core.deprecation import renamed
from metis.registry.registry import (
    AdapterEntry,
    AdapterStatus,
    ModelEntry,
    ModelRoute,
    NotConfiguredError,
    Registry,
    RegistryFile,
)

__all__ = [
    "AdapterEntry",
    "AdapterStatus",
    "ModelEntry",
    "ModelRoute",
    "NotConfiguredError",
    "Registry",
    "RegistryFile",
]
if not TYPE_CHECKING:  # a type checker sees the names above and no other (Route is gone)
    __getattr__ = renamed(__name__, {"Route": "ModelRoute"}, globals())
