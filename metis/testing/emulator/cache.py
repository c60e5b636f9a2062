"""The simulated prompt cache: it remembers request prefixes (cumulative hashes of a prompt's
segments) so usage reports cache reads and writes the way each provider does."""

from __future__ import annotations

import hashlib
import threading

from metis.testing.emulator.wire import count_tokens

LOOKBACK_BLOCKS = 20
"""Anthropic looks for an earlier cache entry up to 20 blocks before each breakpoint."""


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
        self,
        provider: str,
        segments: list[str],
        breakpoints: list[int],
        blocks: list[int] | None = None,
        lookback: int = LOOKBACK_BLOCKS,
    ) -> tuple[int, int]:
        """Anthropic and Bedrock: prefixes end at cache breakpoints, and each breakpoint
        finds an entry written earlier up to ``lookback`` blocks before it (``blocks``: how
        many each segment has; one each when not given); returns (read, written)."""
        prefixes = self._prefixes(provider, segments)
        sizes = blocks or [1] * len(segments)
        marks = sorted({b for b in breakpoints if 0 <= b < len(prefixes)})
        if not marks:
            return 0, 0
        with self._lock:
            read = 0
            for mark in marks:
                for at in self._looked_back(mark, sizes, lookback):
                    key, tokens = prefixes[at]
                    if key in self._seen and tokens >= self.min_tokens:
                        read = max(read, tokens)
                        break
            last_key, last_tokens = prefixes[marks[-1]]
            fresh = last_tokens >= self.min_tokens and last_key not in self._seen
            written = last_tokens - read if fresh else 0
            self._seen.update(
                key for key, tokens in (prefixes[b] for b in marks) if tokens >= self.min_tokens
            )
        return read, written

    @staticmethod
    def _looked_back(mark: int, sizes: list[int], lookback: int) -> list[int]:
        """The segments a breakpoint at ``mark`` checks, itself first, then back while the
        blocks passed stay within ``lookback``."""
        found, passed = [mark], 0
        for at in range(mark - 1, -1, -1):
            passed += sizes[at + 1] if at + 1 < len(sizes) else 1
            if passed > lookback:
                break
            found.append(at)
        return found

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
