"""Faults the emulator injects: per request (an ``x-emulator-fault`` header), queued by the test
(:meth:`Emulator.push_fault`), or per run (a schedule or rates drawn from a seeded RNG).

A fault is written ``kind[=arg][;key=value...]``:

===================  ============================================================================
``rate_limit[=S]``   429 in the provider's format, ``retry-after: S`` (default 1 s; Gemini says it
                     in a ``RetryInfo`` detail instead, as Gemini does)
``overloaded``       529 ``overloaded_error`` (Anthropic), 503 everywhere else
``server_error``     500
``auth``             401 (Gemini: 400 ``API_KEY_INVALID``, as Gemini answers a bad key)
``context_overflow`` 400 with the provider's own "prompt is too long" wording and code
``out_of_credit``    the provider's own answer to an account that cannot pay: Anthropic's 400
                     "Your credit balance is too low ...", OpenAI's 429 ``insufficient_quota``,
                     Gemini's 429 "Your prepayment credits are depleted ...", Bedrock's 403
                     ``INVALID_PAYMENT_INSTRUMENT`` (an Ollama server bills no one: a 402)
``drop[=N]``         the connection is closed after N stream events (default 2; a non-streamed
                     request gets no response at all)
``stall[=S]``        after ``after`` events (default 1) nothing is sent for S seconds (default 30)
                     with the connection open, then the stream goes on
``malformed``        after ``after`` events (default 1) one event's JSON arrives cut in half
                     (a non-streamed request gets a truncated JSON body)
``stream_error[=K]`` after ``after`` events (default 1) the provider's in-stream error (class K:
                     overloaded (default), server_error, rate_limit) and the stream ends
``slow[=S]``         S seconds (default 0.05) before each event; combines with any other fault
``none``             no fault for this request, whatever the run's plan says
===================  ============================================================================

Aliases: 429, 529, 503, 500, 401, overflow, disconnect, hang, invalid_json, error.

A run's plan (``Emulator(faults=...)``) is a comma-separated list of faults, each with a rate
(``rate_limit:0.1``: drawn per request) or a schedule (``overloaded@1``, ``drop=3@2-4``: by
request number, counting from 1). Draws come from ``random.Random`` seeded with the run's seed
and the request number, so a run with the same seed and request order injects the same faults.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

STATUS_KINDS = frozenset(
    {"rate_limit", "overloaded", "server_error", "auth", "context_overflow", "out_of_credit"}
)
STREAM_KINDS = frozenset({"drop", "stall", "malformed", "stream_error"})
MODIFIER_KINDS = frozenset({"slow"})
KINDS = STATUS_KINDS | STREAM_KINDS | MODIFIER_KINDS | {"none"}
ERROR_CLASSES = ("overloaded", "server_error", "rate_limit")
"""What a ``stream_error`` may name as its error's class."""

ALIASES = {
    alias: kind
    for kind, aliases in {
        "rate_limit": "429 ratelimit",
        "overloaded": "529 503 overload",
        "server_error": "500 server",
        "auth": "401 unauthorized",
        "context_overflow": "overflow context",
        "out_of_credit": "402 credit billing",
        "drop": "disconnect",
        "stall": "hang",
        "malformed": "invalid_json",
        "stream_error": "error in_stream_error",
    }.items()
    for alias in aliases.split()
}


class FaultSpecError(ValueError):
    """A fault written wrong (unknown kind, bad number, bad rate or schedule)."""


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str
    arg: str | None = None
    after: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise FaultSpecError(f"unknown fault {self.kind!r}; known: {', '.join(sorted(KINDS))}")
        if self.kind in ("drop", "rate_limit", "stall", "slow"):
            self._number(0.0)
        if self.kind == "stream_error" and self.arg not in (None, *ERROR_CLASSES):
            raise FaultSpecError(f"stream_error class {self.arg!r}: {'|'.join(ERROR_CLASSES)}")

    def _number(self, default: float) -> float:
        if self.arg is None:
            return default
        try:
            value = float(self.arg)
        except ValueError:
            raise FaultSpecError(f"{self.kind}={self.arg!r}: expected a number") from None
        if value < 0:
            raise FaultSpecError(f"{self.kind}={self.arg!r}: expected a number >= 0")
        return value

    @property
    def seconds(self) -> float:
        """stall: how long; slow: the delay per event; rate_limit: the retry-after."""
        defaults = {"stall": 30.0, "slow": 0.05, "rate_limit": 1.0}
        return self._number(defaults.get(self.kind, 0.0))

    @property
    def events(self) -> int:
        """How many events go out before the fault (drop: its argument; others: ``after``)."""
        if self.kind == "drop":
            return int(self._number(2))
        return 1 if self.after is None else self.after

    @property
    def error_class(self) -> str:
        return self.arg or "overloaded"

    def __str__(self) -> str:
        text = self.kind + (f"={self.arg}" if self.arg is not None else "")
        return text + (f";after={self.after}" if self.after is not None else "")


def parse_fault(text: str) -> Fault:
    """``kind[=arg][;after=N]`` -> Fault."""
    head, *extras = [part.strip() for part in text.strip().split(";")]
    kind, _, arg = head.partition("=")
    kind = kind.strip().lower().replace("-", "_")
    kind = ALIASES.get(kind, kind)
    after: int | None = None
    for extra in extras:
        key, _, value = extra.partition("=")
        if key.strip() != "after":
            raise FaultSpecError(f"{text!r}: unknown option {key.strip()!r} (only after=N)")
        try:
            after = int(value)
        except ValueError:
            raise FaultSpecError(f"{text!r}: after= takes a whole number") from None
        if after < 0:
            raise FaultSpecError(f"{text!r}: after= must be >= 0")
    return Fault(kind, arg.strip() or None if arg else None, after)


def parse_faults(text: str) -> list[Fault]:
    """A header value: faults separated by commas (empty -> none)."""
    return [parse_fault(item) for item in text.split(",") if item.strip()]


@dataclass(frozen=True, slots=True)
class FaultRule:
    """One entry of a run's plan: a fault with a rate, or with request numbers (from 1)."""

    fault: Fault
    rate: float = 0.0
    requests: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise FaultSpecError(f"{self.fault}: rate {self.rate} is not within 0..1")

    def scheduled(self, number: int) -> bool:
        return any(lo <= number <= hi for lo, hi in self.requests)


def parse_rule(text: str) -> FaultRule:
    text = text.strip()
    if "@" in text:
        head, _, schedule = text.partition("@")
        ranges: list[tuple[int, int]] = []
        for part in schedule.split("+"):
            lo, _, hi = part.partition("-")
            try:
                first = int(lo)
                last = int(hi) if hi else first
            except ValueError:
                raise FaultSpecError(f"{text!r}: a schedule is N, N-M or N+M+...") from None
            ranges.append((first, last))
        return FaultRule(parse_fault(head), requests=tuple(ranges))
    head, sep, rate = text.rpartition(":")
    if not sep:
        return FaultRule(parse_fault(text), rate=1.0)
    try:
        value = float(rate)
    except ValueError:
        raise FaultSpecError(f"{text!r}: the rate after ':' must be a number") from None
    return FaultRule(parse_fault(head), rate=value)


class FaultPlan:
    """A run's faults. ``pick(n)`` gives request n's faults: every scheduled rule that names n,
    else at most one rate rule (one draw over the rates laid end to end), plus any ``slow``
    (each drawn on its own)."""

    def __init__(self, rules: Iterable[FaultRule] = (), seed: int = 0) -> None:
        self.rules = list(rules)
        self.seed = seed
        primary = sum(r.rate for r in self.rules if not r.requests and r.fault.kind != "slow")
        if primary > 1.0 + 1e-9:
            raise FaultSpecError(f"the fault rates add up to {primary:.3f} > 1")

    @classmethod
    def parse(cls, spec: str | Sequence[FaultRule] | None, seed: int = 0) -> FaultPlan:
        if spec is None:
            return cls((), seed)
        if isinstance(spec, str):
            return cls([parse_rule(item) for item in spec.split(",") if item.strip()], seed)
        return cls(spec, seed)

    def pick(self, number: int) -> list[Fault]:
        chosen = [r.fault for r in self.rules if r.requests and r.scheduled(number)]
        rng = random.Random(f"{self.seed}:{number}")
        draw = rng.random()
        edge = 0.0
        primary_done = any(f.kind not in MODIFIER_KINDS for f in chosen)
        for rule in self.rules:
            if rule.requests:
                continue
            if rule.fault.kind in MODIFIER_KINDS:
                if rng.random() < rule.rate:
                    chosen.append(rule.fault)
                continue
            edge += rule.rate
            if not primary_done and draw < edge:
                chosen.append(rule.fault)
                primary_done = True
        return chosen

    def __bool__(self) -> bool:
        return bool(self.rules)


def primary(faults: Sequence[Fault]) -> Fault | None:
    """The one fault that decides the response (the first that is not a modifier)."""
    return next((f for f in faults if f.kind not in MODIFIER_KINDS and f.kind != "none"), None)


def delay(faults: Sequence[Fault]) -> float:
    return sum(f.seconds for f in faults if f.kind == "slow")
