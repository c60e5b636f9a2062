"""Import paths that users have keep working after the layout move (design review §3c): the
Redis paths are re-exports for one release, ``metis.adapter`` and ``metis.registry`` are
packages whose ``__init__`` re-exports the public names."""

from __future__ import annotations

import metis.adapter
import metis.redis.availability
import metis.redis.limits
import metis.redis.tool_ids
import metis.registry
import metis.routing.availability_redis
import metis.routing.limits_redis
import metis.session_redis
from metis.adapter import adapter as adapter_module
from metis.registry import registry as registry_module


def test_the_old_redis_paths_re_export_the_moved_classes() -> None:
    assert metis.session_redis.RedisToolIdStore is metis.redis.tool_ids.RedisToolIdStore
    assert metis.session_redis.RedisError is metis.redis.tool_ids.RedisError
    assert (
        metis.routing.availability_redis.RedisAvailability
        is metis.redis.availability.RedisAvailability
    )
    assert metis.routing.limits_redis.RedisBuckets is metis.redis.limits.RedisBuckets
    assert metis.routing.limits_redis.RedisSlots is metis.redis.limits.RedisSlots


def test_the_adapter_and_registry_packages_re_export_their_public_names() -> None:
    assert metis.adapter.Adapter is adapter_module.Adapter
    assert metis.adapter.build_adapter is adapter_module.build_adapter
    for name in registry_module.__all__:
        assert getattr(metis.registry, name) is getattr(registry_module, name)
    assert sorted(metis.registry.__all__) == sorted(registry_module.__all__)
