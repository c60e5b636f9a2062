"""What a failed Redis command means, as a classified metis error naming the server.

coredis raises its own exceptions, often inside an exception group (its clients run their
connections in a task group); :func:`classify` finds the failure in the group and says what
it is: :class:`~metis.errors.NetworkError` for a server that is down, refused the connection
or did not answer in time, :class:`RedisError` for an error reply, and
:class:`~metis.errors.ProtocolError` for a reply that is not Redis's. Messages never carry
the password, whatever coredis put in its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metis.errors import AdapterError, ErrorClass, NetworkError, ProtocolError, redact

if TYPE_CHECKING:
    from metis.redis.target import RedisTarget

__all__ = ["RedisError", "classify"]

# Error codes that mean "not now" rather than "never": the server is loading its data set, busy
# running a script, or its primary is down.
_TRANSIENT_CODES = frozenset({"LOADING", "BUSY", "TRYAGAIN", "MASTERDOWN", "CLUSTERDOWN"})


class RedisError(AdapterError):
    """Redis answered with an error reply. ``code`` is the reply's first word (``WRONGPASS``,
    ``NOAUTH``, ``WRONGTYPE``, ``ERR``...)."""

    error_class = ErrorClass.OTHER

    def __init__(self, message: str, *, code: str = "ERR") -> None:
        self.code = code
        super().__init__(message, retryable=code in _TRANSIENT_CODES)


def _leaf(exc: BaseException) -> BaseException:
    """The first failure inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _code(failure: BaseException, text: str) -> str:
    """The reply's code: coredis turns some replies into exception types and drops the word."""
    from coredis import exceptions as redis

    for kind, code in (
        (redis.WrongTypeError, "WRONGTYPE"),
        (redis.BusyLoadingError, "LOADING"),
        (redis.ReadOnlyError, "READONLY"),
        (redis.ExecAbortError, "EXECABORT"),
        (redis.NoScriptError, "NOSCRIPT"),
        (redis.TryAgainError, "TRYAGAIN"),
        (redis.ClusterDownError, "CLUSTERDOWN"),
        (redis.MovedError, "MOVED"),
        (redis.AskError, "ASK"),
    ):
        if isinstance(failure, kind):
            return code
    word = text.split(" ", 1)[0]
    return word if word.isupper() else "ERR"


def classify(exc: BaseException, target: RedisTarget, timeout: float) -> AdapterError:
    """The metis error for ``exc``, raised by a command to ``target``."""
    from coredis import exceptions as redis

    failure = _leaf(exc)
    if isinstance(failure, AdapterError):
        return failure
    where = f"redis {target.where}"
    text = redact(str(failure), target.password, target.sentinel_password)
    if isinstance(failure, TimeoutError):
        return NetworkError(f"{where}: timed out after {timeout:g}s")
    if isinstance(failure, redis.AuthenticationRequiredError):
        return RedisError(f"{where} needs a password: {text}", code="NOAUTH")
    if isinstance(failure, redis.AuthenticationError | redis.AuthorizationError):
        return RedisError(f"{where} refused the credentials: {text}", code="WRONGPASS")
    if isinstance(failure, redis.ResponseError | redis.BusyLoadingError):
        code = _code(failure, text)
        said = text if text.startswith(code) else f"{code} {text}"
        return RedisError(f"{where}: {said}", code=code)
    if isinstance(failure, redis.InvalidResponse | redis.ProtocolError):
        return ProtocolError(f"{where}: not a Redis reply: {text}")
    if isinstance(failure, redis.ConnectionError | OSError):
        return NetworkError(f"{where}: {text or type(failure).__name__}")
    if isinstance(failure, UnicodeError):
        return ProtocolError(f"{where}: text that is not UTF-8: {type(failure).__name__}")
    if isinstance(failure, ValueError | TypeError | LookupError):
        # coredis fits each reply to its command's shape; a reply of another shape fails there
        return ProtocolError(f"{where}: a reply of the wrong shape: {text}")
    return RedisError(f"{where}: {type(failure).__name__}: {text}", code="ERR")
