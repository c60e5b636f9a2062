"""A body still compressed where text was expected: a server or proxy that compressed it
without the ``Content-Encoding`` header saying so (metis decodes only a declared encoding,
however many times it was applied: ``metis/transport/decoding.py``). Its first bytes say
which compression it looks like, so the error names that rather than "invalid UTF-8"."""

from __future__ import annotations

_MAGIC = (
    (b"\x1f\x8b", "gzip", "1f 8b"),
    (b"\x28\xb5\x2f\xfd", "zstd", "28 b5 2f fd"),
)


def undeclared_compression(body: bytes) -> str | None:
    """What ``body`` looks like when it opens with a compression's magic bytes (text never
    does: neither is valid UTF-8 there); None otherwise."""
    for magic, name, shown in _MAGIC:
        if body.startswith(magic):
            return (
                f"the body looks {name}-compressed ({shown} at its start) but no Content-Encoding"
                " declared it"
            )
    return None
