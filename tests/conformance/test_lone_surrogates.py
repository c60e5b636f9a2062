"""Whatever string of a provider's reply is a lone UTF-16 surrogate, the call's events, its
final message and its error encode as UTF-8 JSON, and the error is classified.

Every recorded reply (``cassettes/`` and ``../shared/real-traffic``: streamed and whole,
successes and errors, of every codec) is replayed with one string of its JSON, or one key,
made a lone surrogate (a JSON ``"\\ud83d"`` escape, which Python's json reads into a ``str``
no UTF-8 can hold): a value in place of what it was, a value with one added at its end (so
it still means what it meant), a key in place of the key. The default run takes each kind of
spot (the payload's type, the path to the string) once for each API, in its shortest
recording, at most ``PER_GROUP`` (25) a group of replies (one API's streamed or whole successes
or errors) picked by a seeded draw; the slow run takes every kind in every recording.
"""

from __future__ import annotations

import os
import random
from collections import defaultdict

import pytest

from . import surrogate_sweep as sweep

PER_GROUP = int(os.environ.get("METIS_SURROGATE_CASES", "25"))
SOURCES = sweep.recorded()


def test_the_sweep_covers_every_format_of_every_codec() -> None:
    """Replies of every codec are swept, streamed and whole, and each body is cut into the
    payloads it is written back from (the joined pieces are the body's JSON again)."""
    apis = {(s.api, s.streamed) for s in SOURCES}
    cassettes = {(a, True) for a in ("anthropic", "openai", "openai_responses", "gemini")}
    assert apis >= cassettes | {("ollama", True), ("openai", False), ("anthropic", False)}
    for source in SOURCES:
        parts = sweep.pieces(source.body, source.content_type)
        again = sweep.pieces(sweep.joined(parts), source.content_type)
        assert [p.data for p in again] == [p.data for p in parts], source
    some = next(s for s in SOURCES if s.streamed and s.api == "anthropic")
    parts = sweep.pieces(some.body, some.content_type)
    spot = next(sweep.spots(parts))
    assert b"\\ud83d" in sweep.mutated(parts, spot, sweep.LONE[0])


def test_a_lone_surrogate_anywhere_in_a_recorded_reply_is_encoded_or_classified() -> None:
    groups = defaultdict(list)
    for case in sweep.cases(SOURCES, every_source=False):
        groups[case.source.api, case.source.streamed, case.source.status].append(case)
    rng = random.Random(5)
    chosen = [
        case
        for _, group in sorted(groups.items())
        for case in (group if len(group) <= PER_GROUP else rng.sample(group, PER_GROUP))
    ]
    found = sweep.faults(chosen)
    assert not found, "\n".join(found[:10])


@pytest.mark.slow
def test_a_lone_surrogate_anywhere_in_every_recorded_reply(request: pytest.FixtureRequest) -> None:
    if "slow" not in (request.config.option.markexpr or "") and not os.environ.get("METIS_SLOW"):
        pytest.skip("the full sweep: select it with -m slow")
    found = sweep.faults(sweep.cases(SOURCES, every_source=True))
    assert not found, "\n".join(found[:10])
