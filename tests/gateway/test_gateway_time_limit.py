"""The 504 of a request past its time says the limit, in seconds, and the setting that sets it:
the gateway's ``request_timeout_seconds``, or a passed-through call's adapter's
``timeout_seconds`` when that is the shorter."""

from __future__ import annotations

from metis.gateway.errors import GatewayTimeoutError, TimeLimit
from metis.gateway.passthrough_call import Upstream


def test_the_504_names_the_limit_and_its_setting() -> None:
    late = TimeLimit(600).exceeded()
    assert isinstance(late, GatewayTimeoutError)
    assert late.message == (
        "the request took longer than the gateway allows: 600 s (gateway.request_timeout_seconds)"
    )


def test_a_passed_through_call_names_the_shorter_of_the_gateways_and_its_adapters_limits() -> None:
    upstream = Upstream(request_timeout_seconds=600)
    adapters = upstream._limit("openai", 30.0)
    assert adapters == TimeLimit(30.0, "adapters.openai.timeout_seconds")
    assert upstream._limit("anthropic", 900.0) == TimeLimit(600)
    assert Upstream(request_timeout_seconds=30)._limit("openai", 30.0) == TimeLimit(30)
