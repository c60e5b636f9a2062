"""models.yaml -> routes and adapters; the code lives in :mod:`metis.registry.registry`
(entries and the file schema beside it)."""

from metis.registry.registry import (
    AdapterEntry,
    AdapterStatus,
    ModelEntry,
    NotConfiguredError,
    Registry,
    RegistryFile,
    Route,
)

__all__ = [
    "AdapterEntry",
    "AdapterStatus",
    "ModelEntry",
    "NotConfiguredError",
    "Registry",
    "RegistryFile",
    "Route",
]
