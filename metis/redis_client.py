"""A small Redis client on anyio streams (RESP2), for asyncio and trio alike.

redis-py's client is asyncio-only, so metis carries this one: an incremental RESP2 parser, a
command encoder and a pooled client that knows only the commands the Redis tool-id store
(:mod:`metis.session_redis`) needs. Connection failures are NetworkErrors naming the server;
passwords never appear in reprs or messages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias
from urllib.parse import parse_qsl, quote, unquote, urlsplit

import anyio
import anyio.abc

from metis.errors import AdapterError, ConfigError, ErrorClass, NetworkError, ProtocolError, redact

if TYPE_CHECKING:
    from types import TracebackType


__all__ = [
    "ErrorReply",
    "RedisClient",
    "RedisError",
    "RespParser",
    "encode_command",
]


# RESP2 ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ErrorReply:
    """An error reply (``-ERR ...``) as a value: parsed like any reply, raised by the client."""

    message: str

    @property
    def code(self) -> str:
        """The error's first word, by Redis convention its kind: ``ERR``, ``WRONGPASS``..."""
        return self.message.split(" ", 1)[0]


Reply: TypeAlias = "str | bytes | int | ErrorReply | list[Reply] | None"
"""A simple string is a ``str``, a bulk string ``bytes``; a null bulk or array is ``None``."""

Arg: TypeAlias = str | bytes | int

MAX_BULK_LENGTH = 512 * 1024 * 1024  # Redis's own limit for a string
MAX_LINE_LENGTH = 64 * 1024  # a type line longer than this is not RESP
MAX_DEPTH = 16  # arrays nested deeper than this are not a reply to our commands
_INTEGER = re.compile(rb"-?[0-9]+")


def encode_command(*args: Arg) -> bytes:
    """One command as a RESP array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, bytes):
            data = arg
        elif isinstance(arg, str):
            data = arg.encode()
        elif isinstance(arg, int) and not isinstance(arg, bool):
            data = b"%d" % arg
        else:
            raise TypeError(f"a Redis argument is str, bytes or int, not {type(arg).__name__}")
        out += (b"$%d\r\n" % len(data), data, b"\r\n")
    return b"".join(out)


class _Incomplete(Exception):
    """The buffer ends inside a reply: wait for more bytes."""


class RespParser:
    """An incremental RESP2 reply parser: :meth:`feed` it bytes as they arrive, take each
    complete reply with :meth:`next_reply`. Malformed input raises
    :class:`metis.errors.ProtocolError`; the parser is then unusable."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._pos = 0  # start of the first reply not yet returned

    def feed(self, data: bytes) -> None:
        if self._pos:
            del self._buffer[: self._pos]
            self._pos = 0
        self._buffer += data

    def next_reply(self) -> tuple[bool, Reply]:
        """``(True, reply)`` for the next complete reply, ``(False, None)`` when the bytes fed
        so far end inside one (it is read again from its start once more arrive)."""
        try:
            reply, self._pos = self._parse(self._pos, 0)
        except _Incomplete:
            return False, None
        return True, reply

    @property
    def pending(self) -> int:
        """How many bytes have been fed but not returned as part of a reply."""
        return len(self._buffer) - self._pos

    def _line(self, pos: int) -> tuple[bytes, int]:
        end = self._buffer.find(b"\r\n", pos)
        if end < 0:
            if len(self._buffer) - pos > MAX_LINE_LENGTH:
                raise ProtocolError("a RESP line is longer than 64 KiB")
            raise _Incomplete
        return bytes(self._buffer[pos:end]), end + 2

    def _parse(self, pos: int, depth: int) -> tuple[Reply, int]:
        if pos >= len(self._buffer):
            raise _Incomplete
        kind = self._buffer[pos : pos + 1]
        line, pos = self._line(pos + 1)
        if kind == b"+":
            return line.decode("utf-8", "replace"), pos
        if kind == b"-":
            return ErrorReply(line.decode("utf-8", "replace")), pos
        if kind == b":":
            return _integer(line), pos
        if kind == b"$":
            length = _integer(line)
            if length == -1:
                return None, pos
            if not 0 <= length <= MAX_BULK_LENGTH:
                raise ProtocolError(f"a bulk string of length {length}")
            end = pos + length
            if len(self._buffer) < end + 2:
                raise _Incomplete
            if self._buffer[end : end + 2] != b"\r\n":
                raise ProtocolError("a bulk string not followed by CRLF")
            return bytes(self._buffer[pos:end]), end + 2
        if kind == b"*":
            count = _integer(line)
            if count == -1:
                return None, pos
            if count < 0:
                raise ProtocolError(f"an array of length {count}")
            if depth >= MAX_DEPTH:
                raise ProtocolError(f"arrays nested more than {MAX_DEPTH} deep")
            items: list[Reply] = []
            for _ in range(count):
                item, pos = self._parse(pos, depth + 1)
                items.append(item)
            return items, pos
        raise ProtocolError(f"unknown RESP type byte {bytes(kind)!r}")


def _integer(line: bytes) -> int:
    if not _INTEGER.fullmatch(line):
        raise ProtocolError(f"not a RESP integer: {line[:40]!r}")
    return int(line)


# Errors -----------------------------------------------------------------------------------------

# Error codes that mean "not now" rather than "never": the server is loading its data set, busy
# running a script, or its primary is down.
_TRANSIENT_CODES = frozenset({"LOADING", "BUSY", "TRYAGAIN", "MASTERDOWN", "CLUSTERDOWN"})


class RedisError(AdapterError):
    """Redis answered a command with an error reply. ``code`` is the reply's first word
    (``WRONGPASS``, ``NOAUTH``, ``WRONGTYPE``, ``ERR``...)."""

    error_class = ErrorClass.OTHER

    def __init__(self, message: str, *, code: str = "ERR") -> None:
        self.code = code
        super().__init__(message, retryable=code in _TRANSIENT_CODES)


# Connection address -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Address:
    host: str | None  # None for a unix socket
    port: int
    path: str | None  # the unix socket's path
    db: int
    username: str | None
    password: str | None

    @property
    def where(self) -> str:
        """How messages name the server: ``host:port`` or ``unix:/path``."""
        if self.path is not None:
            return f"unix:{self.path}"
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        return f"{host}:{self.port}"

    def display_url(self) -> str:
        """The url with the password shown as ``***``."""
        user = quote(self.username or "", safe="")
        auth = f"{user}:***@" if self.password is not None else (f"{user}@" if user else "")
        if self.path is not None:
            return f"unix://{auth}{self.path}?db={self.db}"
        return f"redis://{auth}{self.where}/{self.db}"


def _parse_url(url: str) -> _Address:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"redis url: {exc}") from None
    username = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = set(query) - {"db"}
    if unknown:
        raise ConfigError(f"redis url: unknown query parameter(s) {sorted(unknown)}; known: db")
    if username and password is None:
        raise ConfigError("redis url: a username needs a password (user:password@host)")

    def db_number(text: str) -> int:
        if not text.isdigit():
            raise ConfigError(f"redis url: the database must be a number, not {text!r}")
        return int(text)

    if parts.scheme == "redis":
        if not parts.hostname:
            raise ConfigError("redis url: no host (redis://host[:port][/db])")
        path_db = parts.path.strip("/")
        if path_db and "db" in query:
            raise ConfigError("redis url: the database is given twice (path and ?db=)")
        db = db_number(path_db or query.get("db", "0"))
        return _Address(parts.hostname, port or 6379, None, db, username, password)
    if parts.scheme == "unix":
        if not parts.path:
            raise ConfigError("redis url: no socket path (unix:///path/to/socket?db=N)")
        db = db_number(query.get("db", "0"))
        return _Address(None, 0, unquote(parts.path), db, username, password)
    if parts.scheme == "rediss":
        raise ConfigError("redis url: rediss:// (TLS) is not supported")
    raise ConfigError(f"redis url: the scheme must be redis:// or unix://, not {parts.scheme!r}")


# Client -----------------------------------------------------------------------------------------

_STREAM_ERRORS = (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream)


class _StaleConnection(Exception):
    """A pooled connection broke before its first reply byte: the server closed it while idle."""


class _Connection:
    def __init__(self, stream: anyio.abc.ByteStream, generation: int) -> None:
        self.stream = stream
        self.generation = generation
        self.parser = RespParser()
        self.answered = False  # whether the current request has had any reply bytes

    async def request(self, payload: bytes, count: int) -> list[Reply]:
        """Send ``payload`` (``count`` pipelined commands) and read ``count`` replies."""
        self.answered = False
        await self.stream.send(payload)
        replies: list[Reply] = []
        while len(replies) < count:
            complete, reply = self.parser.next_reply()
            if complete:
                replies.append(reply)
                continue
            data = await self.stream.receive(65536)
            self.answered = True
            self.parser.feed(data)
        return replies

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.aclose_forcefully(self.stream)


class RedisClient:
    """A minimal pooled RESP2 client over anyio: ``redis://[[user]:password@]host[:port][/db]``
    or ``unix:///path/to/socket?db=N``.

    Each command checks a connection out of the pool (opening one, with AUTH and SELECT, when
    none is idle) and returns it when the reply is read; a connection that failed, timed out or
    was cancelled mid-command is closed instead. At most ``max_connections`` are open at once;
    more concurrent commands wait for one. Each command, waiting included, is bounded by
    ``timeout`` seconds. Failures to reach the server raise :class:`metis.errors.NetworkError`
    naming ``host:port``; error replies raise :class:`RedisError`.
    """

    def __init__(
        self,
        url: str = "redis://localhost:6379/0",
        *,
        max_connections: int = 10,
        timeout: float = 5.0,
    ) -> None:
        if max_connections < 1:
            raise ConfigError("redis: max_connections must be at least 1")
        if not timeout > 0:
            raise ConfigError("redis: timeout must be positive")
        self._address = _parse_url(url)
        self.max_connections = max_connections
        self.timeout = timeout
        self._slots = anyio.Semaphore(max_connections)
        # Only touched by synchronous code between awaits, so no lock is needed.
        self._idle: list[_Connection] = []
        self._generation = 0  # bumped by aclose: older connections are closed, not pooled

    @property
    def url(self) -> str:
        """The server's url, with any password shown as ``***``."""
        return self._address.display_url()

    @property
    def where(self) -> str:
        return self._address.where

    def __repr__(self) -> str:
        return f"RedisClient({self.url!r}, max_connections={self.max_connections})"

    # Commands --------------------------------------------------------------------------------

    async def execute(self, *args: Arg) -> Reply:
        """Run one command; an error reply raises :class:`RedisError`."""
        [reply] = await self._run(encode_command(*args), 1)
        return self._check(reply)

    async def transaction(self, commands: Sequence[Sequence[Arg]]) -> list[Reply]:
        """Run ``commands`` in one MULTI/EXEC block, in one round trip; their replies."""
        payload = b"".join(
            [
                encode_command("MULTI"),
                *(encode_command(*c) for c in commands),
                encode_command("EXEC"),
            ]
        )
        replies = await self._run(payload, len(commands) + 2)
        for reply in replies[:-1]:  # +OK, then +QUEUED or a refusal per command
            self._check(reply)
        results = self._check(replies[-1])
        if not isinstance(results, list):
            raise ProtocolError(f"redis at {self.where}: EXEC answered {results!r}")
        for result in results:
            self._check(result)
        return results

    async def ping(self) -> bool:
        return await self.execute("PING") == "PONG"

    async def hmget(self, key: str, fields: Sequence[str]) -> list[bytes | None]:
        reply = await self.execute("HMGET", key, *fields)
        return self._bulk_list(reply, allow_null=True)

    async def hset(self, key: str, mapping: Mapping[str, Arg]) -> int:
        args = [x for pair in mapping.items() for x in pair]
        return self._int(await self.execute("HSET", key, *args))

    async def sadd(self, key: str, *members: Arg) -> int:
        return self._int(await self.execute("SADD", key, *members))

    async def smembers(self, key: str) -> list[bytes]:
        return [m for m in self._bulk_list(await self.execute("SMEMBERS", key)) if m is not None]

    async def expire(self, key: str, seconds: int) -> bool:
        return self._int(await self.execute("EXPIRE", key, seconds)) == 1

    async def ttl(self, key: str) -> int:
        """Seconds the key has left; -1 when it never expires, -2 when it does not exist."""
        return self._int(await self.execute("TTL", key))

    async def delete(self, *keys: str) -> int:
        return self._int(await self.execute("DEL", *keys)) if keys else 0

    # Pool ------------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the idle connections; those in use are closed when their command ends. The
        client stays usable: a later command opens a new connection."""
        self._generation += 1
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.aclose()

    async def __aenter__(self) -> RedisClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _run(self, payload: bytes, count: int) -> list[Reply]:
        phase = "waiting for a free connection"
        try:
            with anyio.fail_after(self.timeout):
                async with self._slots:
                    while True:
                        conn = self._idle.pop() if self._idle else None
                        reused = conn is not None
                        if conn is None:
                            phase = "connecting"
                            conn = await self._connect()
                        phase = "waiting for a reply"
                        try:
                            return await self._request(conn, payload, count, reused)
                        except _StaleConnection:
                            # The server closed this idle connection (a restart, a client
                            # kill): the others in the pool are likely dead too. Every command
                            # here is idempotent, so sending it again on a new one is safe.
                            idle, self._idle = self._idle, []
                            for other in idle:
                                await other.aclose()
        except TimeoutError:
            raise NetworkError(
                f"redis at {self.where}: timed out after {self.timeout:g}s (while {phase})"
            ) from None
        except _STREAM_ERRORS as exc:
            raise NetworkError(f"redis at {self.where}: {_describe(exc)} (while {phase})") from exc
        except ProtocolError as exc:
            raise ProtocolError(f"redis at {self.where}: {exc.message}") from None

    async def _request(
        self, conn: _Connection, payload: bytes, count: int, reused: bool
    ) -> list[Reply]:
        keep = False
        try:
            replies = await conn.request(payload, count)
            # Bytes past the last reply mean the stream is out of step: do not reuse it.
            keep = conn.parser.pending == 0 and conn.generation == self._generation
            return replies
        except _STREAM_ERRORS:
            if reused and not conn.answered:
                raise _StaleConnection from None
            raise
        finally:
            if keep:
                self._idle.append(conn)
            else:
                await conn.aclose()

    async def _connect(self) -> _Connection:
        address = self._address
        stream: anyio.abc.ByteStream
        if address.path is not None:
            stream = await anyio.connect_unix(address.path)
        else:
            assert address.host is not None
            stream = await anyio.connect_tcp(address.host, address.port)
        conn = _Connection(stream, self._generation)
        setup: list[tuple[Arg, ...]] = []
        if address.password is not None:
            if address.username:
                setup.append(("AUTH", address.username, address.password))
            else:
                setup.append(("AUTH", address.password))
        if address.db:
            setup.append(("SELECT", address.db))
        if not setup:
            return conn
        try:
            replies = await conn.request(b"".join(encode_command(*c) for c in setup), len(setup))
            for reply in replies:
                self._check(reply)
        except BaseException:
            await conn.aclose()
            raise
        return conn

    # Replies ---------------------------------------------------------------------------------

    def _check(self, reply: Reply) -> Reply:
        if not isinstance(reply, ErrorReply):
            return reply
        text = redact(reply.message, self._address.password)
        code = reply.code
        if code in ("WRONGPASS", "NOAUTH") or (code == "ERR" and "AUTH" in reply.message):
            meaning = "needs a password" if code == "NOAUTH" else "refused the credentials"
            raise RedisError(f"redis at {self.where} {meaning}: {text}", code=code)
        raise RedisError(f"redis at {self.where}: {text}", code=code)

    def _int(self, reply: Reply) -> int:
        if not isinstance(reply, int):
            raise ProtocolError(f"redis at {self.where}: expected an integer, got {reply!r}")
        return reply

    def _bulk_list(self, reply: Reply, allow_null: bool = False) -> list[bytes | None]:
        out: list[bytes | None] = []
        for item in reply if isinstance(reply, list) else [ErrorReply("")]:
            if not (isinstance(item, bytes) or (allow_null and item is None)):
                raise ProtocolError(f"redis at {self.where}: expected bulk strings, got {reply!r}")
            out.append(item)
        return out


def _describe(exc: BaseException) -> str:
    if isinstance(exc, anyio.EndOfStream):
        return "the server closed the connection"
    if isinstance(exc, anyio.BrokenResourceError | anyio.ClosedResourceError):
        cause = exc.__cause__ or exc.__context__
        return f"the connection broke ({cause or type(exc).__name__})"
    cause = exc.__cause__
    if isinstance(cause, OSError):  # anyio's "All connection attempts failed", one attempt
        return _describe(cause)
    if isinstance(cause, BaseExceptionGroup):  # ... several (IPv6 and IPv4, say)
        return "; ".join(dict.fromkeys(_describe(e) for e in cause.exceptions))
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    return f"cannot connect: {exc or type(exc).__name__}"


# The store --------------------------------------------------------------------------------------
