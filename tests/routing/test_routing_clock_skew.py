"""Workers whose clocks disagree, sharing a route's state in Redis: the times are the Redis
server's, so a cool-down or a slot one worker stamps means the same to every other."""

from __future__ import annotations

import sys
import textwrap

import anyio
import coredis
import pytest

from metis.errors import ErrorClass
from metis.redis.availability import RedisAvailability
from metis.redis.limits import RedisSlots
from metis.routing import CooldownPolicy

from .. import routing_redis

redis_port = routing_redis.redis_port
redis_prefix = routing_redis.redis_prefix
KEY = "anthropic:claude-sonnet-4-5"
POLICY = CooldownPolicy(max_seconds=60.0, probe_timeout=30.0)
BEHIND = textwrap.dedent(
    """
    import sys, time
    real = time.time
    time.time = lambda: real() - 3600  # this machine's clock: an hour behind
    import anyio, coredis
    from metis.errors import ErrorClass
    from metis.redis.availability import RedisAvailability
    from metis.redis.limits import RedisSlots
    from metis.routing import CooldownPolicy

    async def main(port, prefix):
        async with coredis.Redis(port=port) as client:
            policy = CooldownPolicy(max_seconds=60.0, probe_timeout=30.0)
            store = RedisAvailability(client, policy, prefix=prefix)
            await store.failed("anthropic:claude-sonnet-4-5", ErrorClass.OVERLOADED, None)
            slots = RedisSlots(client, prefix=prefix)
            print(await slots.take("openai", 1, "behind", 60.0))

    anyio.run(main, int(sys.argv[1]), sys.argv[2])
    """
)


@pytest.mark.anyio
@pytest.mark.backend_independent(False)
async def test_a_worker_whose_clock_is_an_hour_behind_still_cools_and_limits_for_all(
    redis_port: int, redis_prefix: str
) -> None:
    """Before: each worker stamped times with its own wall clock, so the cool-down and the
    slot of a worker an hour behind had ended, for the others, before they began (the
    model called again at once, the route's one slot taken twice); one an hour ahead kept
    the model cooling down an hour for everyone."""
    with anyio.fail_after(120):  # a bound on a hang, not a timing
        done = await anyio.run_process(
            [sys.executable, "-c", BEHIND, str(redis_port), redis_prefix], check=False
        )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.split() == [b"True"]
    async with coredis.Redis(port=redis_port) as client:
        admission, _ = await RedisAvailability(client, POLICY, prefix=redis_prefix).admit(KEY)
        taken = await RedisSlots(client, prefix=redis_prefix).take("openai", 1, "here", 60.0)
    assert not admission.admitted
    base = dict(POLICY.base_seconds)[ErrorClass.OVERLOADED]
    assert 0 < admission.wait_seconds <= base
    assert not taken
