"""Re-exports for one release: the code lives in :mod:`metis.redis.availability`."""

from metis.redis.availability import RedisAvailability

__all__ = ["RedisAvailability"]
