"""The simulated prompt cache: it remembers request prefixes (cumulative hashes of a prompt's
segments) so usage reports cache reads and writes the way each provider does."""

from __future__ import annotations

import hashlib
import threading

from metis.testing.emulator.wire import count_tokens


class PromptCache:
    """``min_tokens`` is the smallest prefix kept."""

    def __init__(self, min_tokens: int = 1024) -> None:
        self.min_tokens = min_tokens
        self._seen: set[bytes] = set()
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self._seen.clear()

    def _prefixes(self, provider: str, segments: list[str]) -> list[tuple[bytes, int]]:
        digest = hashlib.sha256(provider.encode())
        out: list[tuple[bytes, int]] = []
        tokens = 0
        for segment in segments:
            digest.update(hashlib.sha256(segment.encode()).digest())
            tokens += count_tokens(segment)
            out.append((digest.copy().digest(), tokens))
        return out

    def explicit(
        self, provider: str, segments: list[str], breakpoints: list[int]
    ) -> tuple[int, int]:
        """Anthropic: prefixes end at cache breakpoints; returns (read, written)."""
        prefixes = self._prefixes(provider, segments)
        marks = sorted({b for b in breakpoints if 0 <= b < len(prefixes)})
        if not marks:
            return 0, 0
        with self._lock:
            read = 0
            for key, tokens in (prefixes[b] for b in marks):
                if key in self._seen and tokens >= self.min_tokens:
                    read = tokens
            last_key, last_tokens = prefixes[marks[-1]]
            fresh = last_tokens >= self.min_tokens and last_key not in self._seen
            written = last_tokens - read if fresh else 0
            self._seen.update(
                key for key, tokens in (prefixes[b] for b in marks) if tokens >= self.min_tokens
            )
        return read, written

    def implicit(self, provider: str, segments: list[str], granularity: int = 1) -> int:
        """OpenAI and Gemini: the longest prefix seen before is read from cache."""
        prefixes = self._prefixes(provider, segments)
        with self._lock:
            read = 0
            for key, tokens in prefixes[:-1]:
                if key in self._seen and tokens >= self.min_tokens:
                    read = tokens
            self._seen.update(key for key, tokens in prefixes if tokens >= self.min_tokens)
        return read - read % granularity
