"""``metis serve --config FILE [--host H] [--port N] [--workers N] [--access-log]
[--timeout-keep-alive S]``: the
gateway under uvicorn (docs/gateway.md). The configuration is read here first, so an error in
it is one line before anything listens; each worker process reads it again
(``METIS_GATEWAY_CONFIG``). uvicorn's access log (a line per request) is off unless asked for:
it cost ~1-2 ms of CPU a request (benchmarks/README.md); the gateway's own access lines
(``gateway.access_log``, metis.gateway.access) are written by each worker."""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from metis.cli.output import CliError, import_modules

CONFIG_VARIABLE = "METIS_GATEWAY_CONFIG"
IMPORTS_VARIABLE = "METIS_GATEWAY_IMPORTS"
"""The modules each worker imports first (``--import``), comma-separated."""


def run(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from metis.gateway.app import METRICS_DIR_VARIABLE
        from metis.gateway.config import GatewayConfig
    except ImportError as missing:
        raise CliError(f"metis serve needs {missing.name}: pip install 'metis[serve]'") from None
    import_modules(args.imports)
    path = str(Path(args.config).expanduser().resolve())
    config = GatewayConfig.load(path)
    _check_stacks(config.registry)
    host = args.host or config.settings.host
    port = config.settings.port if args.port is None else args.port
    drain = config.settings.drain_seconds
    keep_alive = args.timeout_keep_alive or config.settings.keep_alive_seconds
    if config.api_key is None and not config.keys:
        print(_open_warning(path, host), file=sys.stderr, flush=True)
    if not config.registry.routes() and not config.registry.route_specs:
        print(f"metis: warning: {path} names no models: every request is a 404", file=sys.stderr)
    if args.workers == 1:
        return _serve_one(config, path, (host, port, keep_alive), args.access_log)
    # uvicorn binds the workers' socket itself and logs its address ("Uvicorn running on")
    print(f"metis serve: {args.workers} workers  ({path})", flush=True)
    if config.settings.redis_url is None:
        print(_unshared_warning(path, args.workers), file=sys.stderr, flush=True)
    os.environ[CONFIG_VARIABLE] = path
    os.environ[IMPORTS_VARIABLE] = ",".join(args.imports)
    with tempfile.TemporaryDirectory(prefix="metis-metrics-") as metrics_dir:
        os.environ.setdefault(METRICS_DIR_VARIABLE, metrics_dir)  # one /metrics for them all
        try:
            uvicorn.run(
                "metis.cli.serve:worker_app",
                factory=True,
                host=host,
                port=port,
                workers=args.workers,
                timeout_graceful_shutdown=drain,
                timeout_keep_alive=keep_alive,
                log_level="info",
                access_log=args.access_log,
                http=http_protocol(),
            )
        except SystemExit as exited:  # as above: the socket not bound, or no worker started
            if exited.code:
                raise _not_started(host, port) from None
            raise
    return 0


def _check_stacks(registry: Any) -> None:
    """Each configured adapter's stack assembled before anything listens: a stage no module
    registered is one line naming ``--import``, not a traceback of the application's start."""
    from metis.errors import StackError

    for status in registry.status():
        if status.configured:
            try:
                registry.adapter(status.name).pipeline  # noqa: B018 (built on first use)
            except StackError as exc:
                own = " (a stage of your own? --import the module that registers it)"
                raise CliError(f"{exc}{own if 'unknown stage' in str(exc) else ''}") from None


def _serve_one(config: Any, path: str, listening: tuple[str, int, int], uvicorn_log: bool) -> int:
    """``metis serve`` in this process (``--workers 1``), its access lines written meanwhile;
    ``listening``: the host, the port and the keep-alive timeout."""
    import uvicorn

    host, port, keep_alive = listening

    from metis.gateway.app import create_app, frozen_for_serving

    access = access_lines(config.settings.access_log)
    served = uvicorn.Config(
        frozen_for_serving(create_app(config)),
        host=host,
        port=port,
        timeout_graceful_shutdown=config.settings.drain_seconds,
        timeout_keep_alive=keep_alive,
        log_level="info",
        access_log=uvicorn_log,
        http=http_protocol(),
    )
    server = _announcing_server(uvicorn.Server, served, path)
    try:
        server.run()
    except SystemExit:  # uvicorn's own exit when it cannot start, its reason logged above
        if server.started:
            raise
        raise _not_started(host, port) from None
    finally:
        no_access_lines(access)
    return 0 if server.started else 1


def worker_app() -> Any:
    """What each worker of ``--workers N`` serves: the application ``METIS_GATEWAY_CONFIG``
    names, its log lines written as one process's are (``metis: warning: [event] ...``), not
    bare by Python's last-resort handler."""
    import logging

    from metis.cli.log_lines import stderr_handler
    from metis.gateway.app import from_environment

    logging.getLogger("metis").addHandler(stderr_handler())
    import_modules([m for m in os.environ.get(IMPORTS_VARIABLE, "").split(",") if m])
    app = from_environment()
    access_lines(app.state.gateway.settings.access_log)
    return app


def access_lines(on: bool) -> Any:
    """When ``on`` (``gateway.access_log``), the gateway's access lines (INFO records of
    ``metis.gateway``) written to stderr as its warnings are (it has no other INFO records);
    the handler, for :func:`no_access_lines`, or None."""
    import logging

    from metis.cli.log_lines import stderr_handler

    if not on:
        return None
    handler = stderr_handler()
    handler.setLevel(logging.INFO)
    handler.addFilter(lambda record: record.levelno < logging.WARNING)  # those: "metis"'s own
    logger = logging.getLogger("metis.gateway")
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    return handler


def no_access_lines(handler: Any) -> None:
    """Undo :func:`access_lines` (a server run in this process has ended)."""
    import logging

    if handler is not None:
        logger = logging.getLogger("metis.gateway")
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)


def _not_started(host: str, port: int) -> CliError:
    return CliError(
        f"the gateway did not start on {host}:{port} (uvicorn's error above; "
        "a port in use: --port N, or stop the server holding it)"
    )


def http_protocol() -> Any:
    """httptools' protocol with the request head bounded (metis.gateway.http_head), or, where
    httptools is not installed, uvicorn's own choice (h11, which bounds a head itself)."""
    try:
        from metis.gateway.http_head import BoundedHeadProtocol
    except ImportError:
        return "auto"
    return BoundedHeadProtocol


def _open_warning(path: str, host: str) -> str:
    """A gateway without keys serves any client with the provider keys of this server."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    reach = "" if loopback else f"; it listens on {host}, which other machines can reach"
    return (
        f"metis: warning: {path} names no gateway key (gateway.api_key_env or "
        f"gateway.keys): any client is served, with this server's provider keys{reach}"
    )


def _unshared_warning(path: str, workers: int) -> str:
    """Workers without a Redis each keep their own state, which a client reaching another
    worker does not find."""
    return (
        f"metis: warning: {path} names no gateway.redis_url: each of the {workers} workers keeps "
        f"its own keys' counts and spend (a key may get {workers} times its rate, places and "
        "budget) and its own stored Responses (a previous_response_id another worker stored "
        "is a 400); name a Redis to share them, or serve with --workers 1"
    )


def _announcing_server(base: Any, config: Any, path: str) -> Any:
    """A ``uvicorn.Server`` that says where it listens once it does: the address it bound (the
    port the system chose for ``--port 0``), after the application started."""

    class Announcing(base):  # type: ignore[misc]
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            address = self.servers[0].sockets[0].getsockname()
            host = f"[{address[0]}]" if ":" in address[0] else address[0]
            print(f"metis serve listening on http://{host}:{address[1]}  ({path})", flush=True)

    return Announcing(config)
