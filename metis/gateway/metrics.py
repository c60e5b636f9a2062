"""The gateway's metrics in Prometheus text format (``GET /metrics``): requests by API,
endpoint, model and status, errors by API, endpoint and class, a route's failed attempts by
model and class, tokens (and those estimated), cost in USD, and request durations by API and
endpoint (docs/gateway.md "Metrics")."""

from __future__ import annotations

import hmac
import logging
from bisect import bisect_left
from collections import Counter
from collections.abc import Mapping, Sequence
from decimal import Decimal
from itertools import accumulate
from typing import Any

from metis.catalog.usage_cost import other_model
from metis.errors import AdapterError, InvalidRequestError
from metis.gateway.access import ACCESS
from metis.gateway.errors import metric_class
from metis.gateway.keys import Keys, given_keys, price
from metis.model.response import TokenUsage

MODEL_CALLS = {
    "anthropic": "POST /v1/messages",
    "chat": "POST /v1/chat/completions",
    "responses": "POST /v1/responses",
    "embeddings": "POST /v1/embeddings",
}
"""Each API's endpoint that calls a model: the ``endpoint`` of a request counted without one."""
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""Duration buckets in seconds: a model call takes seconds to minutes."""


def scrape_refused(key: str | None, headers: Mapping[str, str]) -> str | None:
    """Why a scrape of ``/metrics`` is refused (None: it is not): it must send ``key`` (when
    ``gateway.metrics.api_key_env`` names one) as ``Authorization: Bearer`` or ``x-api-key``."""
    if key is None:
        return None
    try:
        given = given_keys(headers)
    except InvalidRequestError as refused:
        return f"{refused}\n"
    if any(g and hmac.compare_digest(g.encode(), key.encode()) for g in given):
        return None
    return "invalid or missing key for /metrics (gateway.metrics.api_key_env)\n"


def _labels(**labels: str) -> str:
    escaped = (
        f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in labels.items()
    )
    return "{" + ",".join(escaped) + "}"


class Metrics:
    def __init__(self) -> None:
        self.requests: Counter[tuple[str, str, str, int]] = Counter()
        self.errors: Counter[tuple[str, str, str]] = Counter()
        self.failed_attempts: Counter[tuple[str, str]] = Counter()
        self.tokens: Counter[tuple[str, str]] = Counter()
        self.estimated: Counter[tuple[str, str]] = Counter()
        """The part of :attr:`tokens` that was estimated, not reported by the provider (a
        stream cut before its usage came, a reply with none)."""
        self.cost: dict[str, Decimal] = {}
        self.durations: dict[tuple[str, str], list[int]] = {}
        """Requests by the first of BUCKETS they took no longer than (each in one bucket: the
        histogram's cumulative counts are summed as it is rendered)."""
        self.duration_sum: dict[tuple[str, str], float] = {}
        self.duration_count: Counter[tuple[str, str]] = Counter()

    def request(
        self, api: str, model: str, status: int, seconds: float, endpoint: str = ""
    ) -> None:
        """One request answered; ``endpoint``: its method and path (the API's model call when
        not given)."""
        where = (api, endpoint or MODEL_CALLS[api])
        self.requests[(*where, model, status)] += 1
        if (line := ACCESS.get()) is not None:
            line.api, line.model = api, model or line.model
        counts = self.durations.setdefault(where, [0] * len(BUCKETS))
        if (index := bisect_left(BUCKETS, seconds)) < len(BUCKETS):  # its bucket alone
            counts[index] += 1
        self.duration_sum[where] = self.duration_sum.get(where, 0.0) + seconds
        self.duration_count[where] += 1

    def error(self, api: str, error: AdapterError | str, endpoint: str = "") -> None:
        """A failed request, counted in ``error``'s class (:func:`metric_class`)."""
        self.errors[(api, endpoint or MODEL_CALLS[api], metric_class(error))] += 1
        if (line := ACCESS.get()) is not None:
            line.api = api
            line.failed(error)

    def failed_attempt(self, model: str, error: AdapterError | str) -> None:
        """A route's attempt at ``model`` that failed before it answered."""
        self.failed_attempts[(model, metric_class(error))] += 1

    def usage(self, model: str, usage: TokenUsage) -> None:
        """A call's tokens under ``model``, another model's (an advisor's passes) under its
        own id; their cost all under ``model``, as the call's key is charged."""
        self.tokens[(model, "input")] += usage.total_input_tokens
        self.tokens[(model, "output")] += usage.output_tokens
        if usage.estimated:
            self.estimated[(model, "input")] += usage.total_input_tokens
            self.estimated[(model, "output")] += usage.output_tokens
        for other in usage.other_models:
            name = other_model(model, other.model)
            self.tokens[(name, "input")] += other.usage.total_input_tokens
            self.tokens[(name, "output")] += other.usage.output_tokens
        usd = price(model, usage)
        if usd is not None and usd.is_finite() and usd >= 0:  # a counter never goes down
            self.cost[model] = self.cost.get(model, Decimal(0)) + usd
        if (line := ACCESS.get()) is not None:
            line.served, line.usd = model, usd
            line.tokens_in, line.tokens_out = usage.total_input_tokens, usage.output_tokens

    def render(self) -> str:
        requests = [
            (_labels(api=a, endpoint=e, model=m, status=str(s)), n)
            for (a, e, m, s), n in self.requests.items()
        ]
        errors = [
            (_labels(api=a, endpoint=e, error_class=k), n) for (a, e, k), n in self.errors.items()
        ]
        attempts = [
            (_labels(model=m, error_class=k), n) for (m, k), n in self.failed_attempts.items()
        ]
        tokens = [(_labels(model=m, direction=d), n) for (m, d), n in self.tokens.items()]
        guessed = [(_labels(model=m, direction=d), n) for (m, d), n in self.estimated.items()]
        cost = [(_labels(model=m), usd) for m, usd in self.cost.items()]
        lines = [
            *_family(
                "requests_total", "Requests answered, by API, endpoint, model and status.", requests
            ),
            *_family("errors_total", "Failed requests, by API, endpoint and error class.", errors),
            *_family(
                "failed_attempts_total",
                "A route's attempts that failed before answering, by model and error class.",
                attempts,
            ),
            *_family("tokens_total", "Tokens used, by model and direction.", tokens),
            *_family(
                "estimated_tokens_total",
                "The tokens of tokens_total that were estimated, not reported by the provider.",
                guessed,
            ),
            *_family("cost_usd_total", "Cost at the catalog's prices, by model.", cost),
            "# HELP metis_gateway_request_seconds Request durations (a stream's until its end).",
            "# TYPE metis_gateway_request_seconds histogram",
        ]
        for (api, endpoint), counts in sorted(self.durations.items()):
            name, total = "metis_gateway_request_seconds", self.duration_count[(api, endpoint)]
            where = _labels(api=api, endpoint=endpoint)
            cumulative = accumulate(counts)  # (each request is counted in its own bucket)
            for bound, n in [*zip([f"{b:g}" for b in BUCKETS], cumulative, strict=True)]:
                lines.append(f"{name}_bucket{_labels(api=api, endpoint=endpoint, le=bound)} {n}")
            lines.append(f"{name}_bucket{_labels(api=api, endpoint=endpoint, le='+Inf')} {total}")
            lines.append(f"{name}_sum{where} {self.duration_sum[(api, endpoint)]:.6f}")
            lines.append(f"{name}_count{where} {total}")
        return "\n".join(lines) + "\n"


async def scraped(metrics: Metrics, shared: Any, keys: Keys, redis_url: str | None) -> str:
    """What a scrape of ``/metrics`` answers: this process's counts, or ``shared``'s (the
    workers' of ``--workers N``, summed: metis.gateway.metrics_shared), and the keys' gauges."""
    text = shared.render() if shared is not None else metrics.render()
    return text + await key_gauges(keys, shared is not None, redis_url)


async def key_gauges(keys: Keys, workers: bool, redis_url: str | None) -> str:
    """Each key of ``gateway.keys``: the USD it has spent, as its ledger counts it (in Redis,
    every gateway's; else this process's), and its budget where it has one, as gauges;
    nothing when the ledger cannot be read (logged: the scrape is answered all the same),
    nor for ``workers`` (of ``--workers N``) without ``redis_url``: each keeps its own."""
    if workers and redis_url is None:
        return ""
    spent, budgets = [], []
    try:
        for state in keys.states():
            name = _labels(key=state.spec.name)
            spent.append((name, format(await keys.ledger.spent(state), "f")))
            if state.spec.budget_usd is not None:
                budgets.append((name, format(state.spec.budget_usd, "f")))
    except Exception as exc:  # a Redis that does not answer: the rest of /metrics still is
        logging.getLogger("metis.gateway").warning(
            "gateway could not read the keys' spend for /metrics (%s)",
            type(exc).__name__,
            extra={"event": "metis.gateway.store_failed"},
        )
        return ""
    if not spent:
        return ""
    lines = [
        *_family("key_spent_usd", "USD each gateway key has spent.", spent, "gauge"),
        *_family("key_budget_usd", "Each gateway key's budget in USD.", budgets, "gauge"),
    ]
    return "\n".join(lines) + "\n"


def _family(
    name: str, text: str, samples: Sequence[tuple[str, object]], kind: str = "counter"
) -> list[str]:
    full = f"metis_gateway_{name}"
    head = [f"# HELP {full} {text}", f"# TYPE {full} {kind}"]
    return head + [f"{full}{labels} {value}" for labels, value in sorted(samples)]
