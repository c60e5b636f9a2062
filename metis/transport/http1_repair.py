"""Response heads that httptools refuses and h11 (the parser of httpx's own transport) reads,
rewritten as h11 reads them, so that the lean transport (:mod:`metis.transport.http1_protocol`)
answers every server httpx answers.

Two shapes differ (RFC 9112 allows both): a field value continued on the next line by leading
whitespace (obs-fold, §5.2), which h11 joins to the line before with one space; and a
``Content-Length`` given more than once, or as a list, with one value throughout (§6.3, item 5),
which h11 reads as that one value, a single field. httptools refuses both, so the protocol keeps
a response's bytes until its head is complete and, when httptools refuses them, parses them
again rewritten by :func:`repaired`: the cost falls on such heads only. What h11 refuses stays
refused: a continuation right after the status line, conflicting lengths, a length that is not
digits.
"""

from __future__ import annotations

import re

HEAD_END = re.compile(rb"\n\r?\n")
"""Where a head ends (the line ends of a bare LF read too)."""
_LINES = re.compile(rb"(?<=\n)")
_DIGITS = re.compile(rb"[0-9]+")
_CONTROLS = re.compile(rb"[\x01-\x08\x0b\x0c\x0e-\x1f\x7f]")
_NEVER = re.compile(rb"\x00|\r(?!\n|\Z)")  # (a CR that ends what came: its LF may follow)
_OPEN_LENGTH = re.compile(rb"(?i)\ncontent-length:[^\n]*\Z")


def controls_only(raw: bytes) -> bool:
    """Whether the head in ``raw`` (as :func:`repaired` takes it) holds control characters
    other than NUL, CR and LF, and no NUL or lone CR: h11 reads those in a field value (RFC 9110
    §5.5 lets a recipient keep them), httptools reads them only when told to be lenient."""
    found = HEAD_END.search(raw)
    head = raw if found is None else raw[: found.end()]
    return _CONTROLS.search(head) is not None and _NEVER.search(head) is None


def may_read(raw: bytes) -> bool:
    """Whether a head httptools refused before it was whole may read once it is: rewritten
    (:func:`repaired`), with control characters (:func:`controls_only`), or ending inside a
    ``Content-Length`` field (a list of one length is read whole)."""
    return repaired(raw) is not None or controls_only(raw) or bool(_OPEN_LENGTH.search(raw))


def repaired(raw: bytes) -> bytes | None:
    """``raw`` (a response's bytes from its first, interim answers included) with each head's
    folded lines joined and a repeated identical ``Content-Length`` made one field; None when
    there is nothing to rewrite."""
    parts: list[bytes] = []
    start = 0
    while True:
        found = HEAD_END.search(raw, start)
        end = len(raw) if found is None else found.end()
        head = raw[start:end]
        parts.append(_repaired_head(head))
        if found is None or not _interim(head):
            parts.append(raw[end:])
            break
        start = end
    made = b"".join(parts)
    return None if made == raw else made


def _interim(head: bytes) -> bool:
    return head[9:10] == b"1" and head[9:12] != b"101"


def _repaired_head(head: bytes) -> bytes:
    lines = [line for line in _LINES.split(head) if line]
    joined: list[bytes] = lines[:2]
    for line in lines[2:]:
        if line[:1] in (b" ", b"\t") and line.strip(b"\r\n"):  # obs-fold, as h11 joins it
            ending = line[len(line.rstrip(b"\r\n")) :]
            joined[-1] = joined[-1].rstrip(b"\r\n") + b" " + line.strip(b" \t\r\n") + ending
        else:
            joined.append(line)
    return b"".join(_one_length(joined))


def _one_length(lines: list[bytes]) -> list[bytes]:
    """``lines`` with their ``Content-Length`` fields made one, when they all say one number."""
    found = [n for n, line in enumerate(lines) if line[:15].lower() == b"content-length:"]
    values = {
        value.strip(b" \t") for n in found for value in lines[n][15:].rstrip(b"\r\n").split(b",")
    }
    if len(values) != 1 or (len(found) == 1 and b"," not in lines[found[0]]):
        return lines
    value = values.pop()
    if not _DIGITS.fullmatch(value):
        return lines
    first = lines[found[0]]
    lines[found[0]] = first[:15] + b" " + value + first[len(first.rstrip(b"\r\n")) :]
    return [line for n, line in enumerate(lines) if n not in found[1:]]
