"""Re-exports for one release: the code lives in :mod:`metis.redis.limits`."""

from metis.redis.limits import RedisBuckets, RedisSlots

__all__ = ["RedisBuckets", "RedisSlots"]
