"""Re-exports for one release: the code lives in :mod:`metis.redis.tool_ids`."""

from metis.redis.tool_ids import RedisError, RedisToolIdStore

__all__ = ["RedisError", "RedisToolIdStore"]
