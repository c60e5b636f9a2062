"""AWS credentials, region and Signature Version 4, through botocore (the ``bedrock`` extra).

metis writes no cryptography: :func:`sign` hands the request to botocore's ``SigV4Auth``, and
credentials come from botocore's standard chain (environment variables, the shared
``~/.aws/credentials`` and ``~/.aws/config`` files with profiles, session tokens, SSO, web
identity, container and instance roles). botocore is imported only when a request is signed,
so a stack that authenticates with a Bedrock API key (a bearer token) needs no extra.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from metis.errors import ConfigError
from metis.pipeline.settings import REGION_GRAMMAR as REGION_GRAMMAR  # the grammar lives with
from metis.pipeline.settings import checked_region as checked_region  # the Bedrock settings

REGION_ENV = ("AWS_REGION", "AWS_DEFAULT_REGION")
INSTALL_HINT = "pip install 'metis[bedrock]' (botocore)"


def botocore_session(profile: str | None) -> Any:
    """A botocore session for ``profile`` (None: AWS_PROFILE, else the default profile).
    Raises ConfigError when botocore is not installed."""
    try:
        import botocore.session
    except ImportError:
        raise ConfigError(f"signing AWS requests needs botocore: {INSTALL_HINT}") from None
    return _botocore_call(lambda: botocore.session.Session(profile=profile))


def region(options: Mapping[str, Any]) -> str | None:
    """The region the adapter's ``region`` setting, AWS_REGION or AWS_DEFAULT_REGION names;
    a value that is not a region's name is a ConfigError."""
    configured = options.get("region")
    if isinstance(configured, str) and configured:
        return checked_region(configured, "the region setting")
    for name in REGION_ENV:
        if value := os.environ.get(name):
            return checked_region(value, name)
    return None


def profile_region(session: Any) -> str | None:
    """The profile's ``region`` in the shared config file. Blocking (reads the file)."""
    found = _botocore_call(session.get_config_variable, "region")
    return found if isinstance(found, str) and found else None


def frozen_credentials(session: Any) -> Any | None:
    """The chain's current credentials (refreshed when they expire), or None. Blocking: the
    chain may read files or call a metadata service, so run it in a worker thread."""
    credentials = _botocore_call(session.get_credentials)
    return None if credentials is None else _botocore_call(credentials.get_frozen_credentials)


def secret_parts(credentials: Any) -> tuple[str, ...]:
    """What of ``credentials`` (botocore's frozen credentials) no error or log may show: the
    secret key and the session token (the access key id names the key, as AWS's own messages
    print it)."""
    parts = (getattr(credentials, "secret_key", None), getattr(credentials, "token", None))
    return tuple(part for part in parts if isinstance(part, str) and part)


class CredentialsUnreachable(Exception):
    """botocore could not reach what gives the credentials (the instance metadata service,
    SSO, STS): a network failure, which another attempt may mend, not a configuration's."""


def _botocore_call(function: Any, *args: Any) -> Any:
    from botocore.exceptions import BotoCoreError, HTTPClientError
    from botocore.exceptions import ConnectionError as BotoConnectionError

    try:
        return function(*args)
    except (BotoConnectionError, HTTPClientError) as exc:
        raise CredentialsUnreachable(f"reaching AWS for credentials failed: {exc}") from None
    except BotoCoreError as exc:  # ProfileNotFound, a config file that does not parse, ...
        raise ConfigError(f"AWS configuration: {exc}") from None


def sign(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    credentials: Any,
    region_name: str,
    service: str,
) -> dict[str, str]:
    """``headers`` plus SigV4's ``Authorization``, ``X-Amz-Date`` and, for temporary
    credentials, ``X-Amz-Security-Token``."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
    SigV4Auth(credentials, service, region_name).add_auth(request)
    return dict(request.headers.items())


def expected_signature(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    credentials: Any,
    region_name: str,
    service: str,
    amz_date: str,
) -> str:
    """The signature botocore computes for a received request, at its own ``X-Amz-Date``
    and over the headers it says it signed (``headers`` holds exactly those): how the
    emulator checks a signature."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
    request.context["timestamp"] = amz_date
    auth = SigV4Auth(credentials, service, region_name)
    canonical = auth.canonical_request(request)
    signature: str = auth.signature(auth.string_to_sign(request, canonical), request)
    return signature
