"""metis's log records on the command line: WARNING and worse as the CLI's own stderr lines
(``metis: warning: [event] ...``), after the end of a reply streaming on stdout."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

from metis.cli.output import Output, one_line


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        event = getattr(record, "event", None)  # what an operator greps: metis.gateway.dropped
        tag = f"[{event}] " if isinstance(event, str) else ""
        text = f"metis: {record.levelname.lower()}: {tag}{one_line(record.getMessage())}"
        failure = record.exc_info[1] if record.exc_info else None
        if failure is not None:  # what failed, or a served request's error says nothing
            text += f": {type(failure).__name__}: {one_line(failure)}"
        if Output.open_line:  # a reply is streaming on stdout: end its line first
            sys.stdout.write("\n")
            sys.stdout.flush()
            Output.open_line = False
        return text


def stderr_handler() -> logging.Handler:
    """The handler writing metis's WARNING records and worse as the CLI's own lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    handler.setLevel(logging.WARNING)
    return handler


@contextlib.contextmanager
def warnings_to_stderr() -> Iterator[None]:
    """metis's WARNING records (a dropped thinking block, a plaintext key) as stderr lines,
    while a command runs."""
    handler = stderr_handler()
    logger = logging.getLogger("metis")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
