"""``metis serve --config FILE [--host H] [--port N] [--workers N]``: the gateway under uvicorn
(docs/gateway.md). The configuration is read here first, so an error in it is one line before
anything listens; each worker process reads it again (``METIS_GATEWAY_CONFIG``)."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from metis.cli.output import CliError

CONFIG_VARIABLE = "METIS_GATEWAY_CONFIG"


def run(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from metis.gateway.app import METRICS_DIR_VARIABLE, create_app, served
        from metis.gateway.config import GatewayConfig
    except ImportError as missing:
        raise CliError(f"metis serve needs {missing.name}: pip install 'metis[serve]'") from None
    path = str(Path(args.config).expanduser().resolve())
    config = GatewayConfig.load(path)
    host = args.host or config.settings.host
    port = config.settings.port if args.port is None else args.port
    drain = config.settings.drain_seconds
    print(f"metis serve listening on http://{host}:{port}  ({path})", flush=True)
    if args.workers == 1:
        uvicorn.run(
            served(create_app(config)),
            host=host,
            port=port,
            timeout_graceful_shutdown=drain,
            log_level="info",
        )
        return 0
    os.environ[CONFIG_VARIABLE] = path
    with tempfile.TemporaryDirectory(prefix="metis-metrics-") as metrics_dir:
        os.environ.setdefault(METRICS_DIR_VARIABLE, metrics_dir)  # one /metrics for them all
        uvicorn.run(
            "metis.gateway.app:from_environment",
            factory=True,
            host=host,
            port=port,
            workers=args.workers,
            timeout_graceful_shutdown=drain,
            log_level="info",
        )
    return 0
