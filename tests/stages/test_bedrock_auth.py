"""Bedrock authentication: SigV4 through botocore (AWS's published test vector), the standard
credential chain (environment, session tokens, profiles in the shared files), Bedrock API keys
as bearer tokens, and what happens when any of it is missing or wrong."""

from __future__ import annotations

import datetime
import importlib.util
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from metis import AdapterConfig, AuthError, CancelledError, ConfigError, NetworkError, build_adapter
from metis.adapter import Adapter
from metis.model import CanonicalRequest, Message
from metis.pipeline.stores import InMemoryToolIdStore
from metis.registry import NotConfiguredError
from metis.stages.auth import aws as aws_auth
from metis.telemetry import CallFailed, ListSink
from metis.wire.framing.aws_eventstream import event_frame

from ..helpers import ImportOnUse

if importlib.util.find_spec("botocore") is None:  # found without importing it
    pytest.skip("the bedrock extra installs botocore", allow_module_level=True)
botocore_credentials = ImportOnUse("botocore.credentials")  # imported by the tests using it

pytestmark = pytest.mark.usefixtures("no_backoff")  # retries are not waited for

AWS_VARS = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)

# AWS's published SigV4 test suite (get-vanilla): the example key pair, service and instant.
EXAMPLE_KEY, EXAMPLE_SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
VANILLA_SIGNATURE = "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
MODEL = "bedrock:us.amazon.nova-micro-v1:0"


@pytest.fixture
def aws_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """No AWS configuration at all: no variables, empty shared files, no metadata service."""
    for name in AWS_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    yield tmp_path


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    instant = datetime.datetime(2015, 8, 30, 12, 36, 0)
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda: instant)


@pytest.mark.parametrize(
    ("method", "url", "headers", "service", "signed", "signature"),
    [
        # the SigV4 test suite's get-vanilla and post-vanilla
        (
            "GET",
            "https://example.amazonaws.com/",
            {},
            "service",
            "host;x-amz-date",
            VANILLA_SIGNATURE,
        ),
        (
            "POST",
            "https://example.amazonaws.com/",
            {},
            "service",
            "host;x-amz-date",
            "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
        ),
        # the worked example of AWS's "Create a signed AWS API request" (IAM ListUsers)
        (
            "GET",
            "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08",
            {"content-type": "application/x-www-form-urlencoded; charset=utf-8"},
            "iam",
            "content-type;host;x-amz-date",
            "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7",
        ),
    ],
)
def test_sigv4_reproduces_aws_published_vectors(
    frozen_clock: None,
    method: str,
    url: str,
    headers: dict[str, str],
    service: str,
    signed: str,
    signature: str,
) -> None:
    credentials = botocore_credentials.Credentials(EXAMPLE_KEY, EXAMPLE_SECRET)
    out = aws_auth.sign(method, url, headers, b"", credentials, "us-east-1", service)
    assert out["X-Amz-Date"] == "20150830T123600Z"
    assert out["Authorization"] == (
        f"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/{service}/aws4_request, "
        f"SignedHeaders={signed}, Signature={signature}"
    )


def test_the_verifier_recomputes_the_signature_and_a_changed_body_breaks_it(
    frozen_clock: None,
) -> None:
    url = "https://bedrock-runtime.us-east-1.amazonaws.com/model/m%3A0/converse"
    body = b'{"messages":[]}'
    creds = botocore_credentials.Credentials(EXAMPLE_KEY, EXAMPLE_SECRET, "session-token")
    headers = aws_auth.sign(
        "POST", url, {"content-type": "application/json"}, body, creds, "us-east-1", "bedrock"
    )
    signed = {"content-type": "application/json", "host": "bedrock-runtime.us-east-1.amazonaws.com"}
    signed["x-amz-date"] = headers["X-Amz-Date"]
    signed["x-amz-security-token"] = headers["X-Amz-Security-Token"]
    signature = headers["Authorization"].rsplit("Signature=", 1)[1]
    args = ("POST", url, signed)
    rest = (creds, "us-east-1", "bedrock", headers["X-Amz-Date"])
    assert aws_auth.expected_signature(*args, body, *rest) == signature
    assert aws_auth.expected_signature(*args, body + b" ", *rest) != signature


def reply_frames() -> bytes:
    return b"".join(
        event_frame(kind, payload)
        for kind, payload in [
            ("messageStart", {"role": "assistant"}),
            ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}}),
            ("contentBlockStop", {"contentBlockIndex": 0}),
            ("messageStop", {"stopReason": "end_turn"}),
            ("metadata", {"usage": {"inputTokens": 1, "outputTokens": 1}}),
        ]
    )


def bedrock(
    sent: list[httpx.Request],
    *,
    status: int = 200,
    error: dict[str, Any] | None = None,
    **config: Any,
) -> Adapter:
    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if status != 200:
            kind = (error or {}).pop("__header_type", None)
            headers = {"x-amzn-ErrorType": kind} if kind else {}
            return httpx.Response(status, headers=headers, content=json.dumps(error).encode())
        return httpx.Response(200, content=reply_frames())

    adapter = build_adapter(
        "bedrock",
        AdapterConfig(
            http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)), **config
        ),
        tool_id_store=InMemoryToolIdStore(),
    )
    return adapter


def ask() -> CanonicalRequest:
    return CanonicalRequest(model=MODEL, messages=[Message.user("hi")], max_output_tokens=64)


async def run(adapter: Adapter) -> str:
    final = [e async for e in adapter.stream(ask())][-1]
    return "".join(b.text for b in final.final_content if b.type == "text")  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_a_bedrock_api_key_is_sent_as_a_bearer_token_unsigned(
    aws_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "ABSKexample")
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    sent: list[httpx.Request] = []
    assert await run(bedrock(sent)) == "Hi"
    (request,) = sent
    assert request.headers["authorization"] == "Bearer ABSKexample"
    assert "x-amz-date" not in request.headers
    assert request.url.host == "bedrock-runtime.eu-west-3.amazonaws.com"
    assert request.url.raw_path == b"/model/us.amazon.nova-micro-v1%3A0/converse-stream"


@pytest.mark.anyio
async def test_environment_credentials_with_a_session_token_are_signed_with_sigv4(
    aws_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", EXAMPLE_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", EXAMPLE_SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", "the-session-token")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    sent: list[httpx.Request] = []
    assert await run(bedrock(sent)) == "Hi"
    (request,) = sent
    authorization = request.headers["authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/us-west-2/bedrock/aws4_request" in authorization
    assert request.headers["x-amz-security-token"] == "the-session-token"
    signed = authorization.split("SignedHeaders=", 1)[1].split(",", 1)[0].split(";")
    received = {name: request.headers[name] for name in signed}
    signature = authorization.rsplit("Signature=", 1)[1]
    creds = botocore_credentials.Credentials(EXAMPLE_KEY, EXAMPLE_SECRET, "the-session-token")
    assert signature == aws_auth.expected_signature(
        "POST",
        str(request.url),
        received,
        request.content,
        creds,
        "us-west-2",
        "bedrock",
        request.headers["x-amz-date"],
    )


@pytest.mark.anyio
async def test_a_profile_of_the_shared_files_gives_the_key_and_the_region(aws_env: Path) -> None:
    (aws_env / "credentials").write_text(
        "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = s1\n"
        "[work]\naws_access_key_id = AKIDWORK\naws_secret_access_key = s2\n"
    )
    (aws_env / "config").write_text("[profile work]\nregion = ap-southeast-2\n")
    sent: list[httpx.Request] = []
    assert await run(bedrock(sent, settings={"profile": "work"})) == "Hi"
    (request,) = sent
    assert request.url.host == "bedrock-runtime.ap-southeast-2.amazonaws.com"
    assert "Credential=AKIDWORK/" in request.headers["authorization"]
    assert "/ap-southeast-2/bedrock/" in request.headers["authorization"]


@pytest.mark.anyio
async def test_no_credentials_is_not_configured_before_anything_is_sent(aws_env: Path) -> None:
    sent: list[httpx.Request] = []
    with pytest.raises(NotConfiguredError) as caught:
        await run(bedrock(sent, settings={"region": "us-east-1"}))
    assert sent == []
    for name in ("AWS_BEARER_TOKEN_BEDROCK", "AWS_ACCESS_KEY_ID", "AWS_PROFILE"):
        assert name in str(caught.value)


@pytest.mark.anyio
async def test_no_region_is_not_configured_before_anything_is_sent(
    aws_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "ABSKexample")
    sent: list[httpx.Request] = []
    with pytest.raises(NotConfiguredError, match="AWS_REGION"):
        await run(bedrock(sent))
    assert sent == []


@pytest.mark.anyio
async def test_an_unknown_profile_is_not_configured(aws_env: Path) -> None:
    sent: list[httpx.Request] = []
    with pytest.raises(NotConfiguredError, match="nosuch"):
        await run(bedrock(sent, settings={"profile": "nosuch", "region": "us-east-1"}))
    assert sent == []


@pytest.mark.anyio
async def test_an_expired_token_is_an_auth_error_and_is_not_retried(
    aws_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", EXAMPLE_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", EXAMPLE_SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", "stale")
    sent: list[httpx.Request] = []
    error = {"message": "The security token included in the request is expired"}
    error["__header_type"] = "ExpiredTokenException:http://internal.amazon.com/coral/"
    adapter = bedrock(sent, status=403, error=error, settings={"region": "us-east-1"})
    with pytest.raises(AuthError) as caught:
        await run(adapter)
    assert len(sent) == 1
    assert caught.value.provider_code == "ExpiredTokenException"
    assert "expired" in caught.value.message


@pytest.mark.anyio
async def test_throttling_is_a_rate_limit_and_is_retried(aws_env: Path) -> None:
    sent: list[httpx.Request] = []
    error = {"message": "Too many requests", "__header_type": "ThrottlingException"}
    adapter = bedrock(
        sent, status=429, error=error, api_key="ABSKexample", settings={"region": "us-east-1"}
    )
    with pytest.raises(Exception) as caught:
        await run(adapter)
    assert caught.value.error_class.value == "rate_limit"  # type: ignore[attr-defined]
    assert len(sent) == 3  # max_retries 2: every attempt was sent


@pytest.fixture
def slow_credentials(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """A credential chain stuck on a metadata service that does not answer until the test
    ends; the event it yields is set when a lookup returns."""
    release, returned = threading.Event(), threading.Event()

    def stuck(session: Any) -> None:
        release.wait(60)
        returned.set()

    monkeypatch.setattr(aws_auth, "frozen_credentials", stuck)
    yield returned
    release.set()


@pytest.mark.anyio
@pytest.mark.usefixtures("aws_env")
async def test_cancel_cuts_a_slow_credential_lookup_short(
    slow_credentials: threading.Event,
) -> None:
    sent: list[httpx.Request] = []
    adapter = bedrock(sent, settings={"region": "us-east-1"})
    request = ask()

    async def call() -> None:
        with pytest.raises(CancelledError):
            await adapter.complete(request)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(call)
        await anyio.sleep(0.3)
        assert adapter.cancel(request.request_id) is True
    assert not slow_credentials.is_set()  # the call ended with the lookup still stuck
    assert sent == []


@pytest.mark.anyio
@pytest.mark.usefixtures("aws_env")
async def test_the_call_deadline_bounds_a_slow_credential_lookup(
    slow_credentials: threading.Event,
) -> None:
    sent: list[httpx.Request] = []
    adapter = bedrock(sent, settings={"region": "us-east-1"}, timeout_seconds=0.5, max_retries=0)
    with pytest.raises(NetworkError, match="deadline"):
        await adapter.complete(ask())
    assert not slow_credentials.is_set()  # the call ended with the lookup still stuck
    assert sent == []


@pytest.mark.anyio
@pytest.mark.usefixtures("aws_env")
async def test_an_inference_profile_arn_is_sent_escaped_whole() -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123"
    sent: list[httpx.Request] = []
    adapter = bedrock(sent, api_key="ABSKexample", settings={"region": "us-east-1"})
    request = CanonicalRequest(
        model=f"bedrock:{arn}", messages=[Message.user("hi")], max_output_tokens=8
    )
    [e async for e in adapter.stream(request)]
    assert sent[0].url.raw_path == (
        b"/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Aapplication-inference-profile"
        b"%2Fabc123/converse-stream"
    )


SESSION_TOKEN = "IQoJb3JpZ2luX2VjEFkaCXVzLWVhc3QtMSJHMEUCIQDexampleSessionToken"


@pytest.mark.anyio
async def test_credentials_fetched_to_sign_are_hidden_when_the_server_echoes_them(
    aws_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", EXAMPLE_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", EXAMPLE_SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    sent: list[httpx.Request] = []
    echoed = f"The security token included in the request is invalid: {SESSION_TOKEN}"
    error = {"message": f"{echoed} (signed with {EXAMPLE_SECRET})"}
    error["__header_type"] = "UnrecognizedClientException"
    adapter = bedrock(sent, status=403, error=error, settings={"region": "us-east-1"})
    sink = ListSink()
    adapter.telemetry = sink
    with pytest.raises(AuthError) as caught:
        await run(adapter)
    assert sent[0].headers["x-amz-security-token"] == SESSION_TOKEN  # it was sent, signed
    (failed,) = [event for event in sink.events if isinstance(event, CallFailed)]
    shown = [str(caught.value), repr(caught.value), json.dumps(caught.value.describe())]
    for text in [*shown, failed.error_message]:
        assert "The security token included in the request is invalid" in text
        assert SESSION_TOKEN not in text and EXAMPLE_SECRET not in text


NOT_REGIONS = [
    "evil.example#",
    "evil.example/",
    "evil.example?",
    "us-east-1.evil.example#",
    "user@evil.example",
    "us east 1",
    "US-EAST-1",
    "us_east_1",
]


@pytest.mark.backend_independent
@pytest.mark.anyio
@pytest.mark.parametrize("source", ["options", "AWS_REGION", "profile"])
async def test_a_region_that_is_not_a_region_name_is_refused_before_sending(
    aws_env: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "ABSKexample")
    for region in NOT_REGIONS:
        options: dict[str, Any] = {}
        if source == "options":
            options["region"] = region
        elif source == "AWS_REGION":
            monkeypatch.setenv("AWS_REGION", region)
        else:
            (aws_env / "config").write_text(f"[default]\nregion = {region}\n")
        sent: list[httpx.Request] = []
        with pytest.raises(ConfigError, match="not an AWS region name") as caught:
            await run(bedrock(sent, settings=options))
        assert not isinstance(caught.value, NotConfiguredError), region
        assert sent == [], region


@pytest.mark.parametrize(
    "region",
    [
        "us-east-1",
        "us-gov-west-1",
        "us-isob-east-1",
        "cn-northwest-1",
        "eusc-de-east-1",
        "ap-southeast-7",
    ],
)
def test_every_shape_of_aws_region_name_is_accepted(region: str) -> None:
    assert aws_auth.checked_region(region, "AWS_REGION") == region


class FailingChain:
    """A botocore session whose credentials fail to refresh with each of ``failures`` in
    turn, then give the example key pair."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.asked = 0

    def get_credentials(self) -> FailingChain:
        return self

    def get_frozen_credentials(self) -> Any:
        self.asked += 1
        if self.failures:
            raise self.failures.pop(0)
        return botocore_credentials.Credentials(
            EXAMPLE_KEY, EXAMPLE_SECRET
        ).get_frozen_credentials()


def failing_chain(monkeypatch: pytest.MonkeyPatch, *failures: Exception) -> FailingChain:
    from metis.stages.auth.aws_sigv4 import AwsSigV4

    chain = FailingChain(*failures)
    monkeypatch.setattr(AwsSigV4, "_session", lambda self, profile: chain)
    return chain


IMDS = "http://169.254.169.254/latest/api/token"


def _unreachable(kind: str) -> Exception:
    from botocore import exceptions

    return getattr(exceptions, kind)(endpoint_url=IMDS)  # type: ignore[no-any-return]


@pytest.mark.anyio
@pytest.mark.usefixtures("aws_env")
@pytest.mark.parametrize("kind", ["EndpointConnectionError", "ConnectTimeoutError"])
async def test_a_credential_service_out_of_reach_is_a_network_error_asked_again(
    monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The metadata service, SSO or STS not answering a refresh is the network's, retried as
    one (the next attempt signed with what the chain gives then); it was a
    NotConfiguredError, as if no credentials were set, and the call was not tried again."""
    chain = failing_chain(monkeypatch, _unreachable(kind))
    sent: list[httpx.Request] = []
    assert await run(bedrock(sent, settings={"region": "us-east-1"})) == "Hi"
    assert chain.asked == 2 and len(sent) == 1
    chain = failing_chain(monkeypatch, *(_unreachable(kind) for _ in range(3)))
    with pytest.raises(NetworkError, match="reaching AWS for credentials failed") as caught:
        await run(bedrock(sent, settings={"region": "us-east-1"}, max_retries=2))
    assert caught.value.retryable and chain.asked == 3 and len(sent) == 1


@pytest.mark.anyio
@pytest.mark.usefixtures("aws_env")
@pytest.mark.parametrize("failure", [KeyError("Expiration"), RuntimeError("a provider's bug")])
async def test_a_credential_refresh_failing_its_own_way_is_an_auth_error_with_its_cause(
    monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> None:
    """It was the bare exception of botocore's (or a custom provider's) refresh."""
    failing_chain(monkeypatch, failure)
    sent: list[httpx.Request] = []
    with pytest.raises(AuthError, match="getting AWS credentials failed") as caught:
        await run(bedrock(sent, settings={"region": "us-east-1"}))
    assert caught.value.__cause__ is failure and sent == []


@pytest.mark.anyio
@pytest.mark.usefixtures("aws_env")
async def test_a_secret_key_that_is_not_utf8_is_an_auth_error_not_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A variable of bytes that are not UTF-8 reads as lone surrogates (os.environ's
    surrogateescape): signing it was a bare UnicodeEncodeError."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", EXAMPLE_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalr\udce9XUtn")
    sent: list[httpx.Request] = []
    with pytest.raises(AuthError, match="not text SigV4 can sign") as caught:
        await run(bedrock(sent, settings={"region": "us-east-1"}))
    assert "XUtn" not in str(caught.value) and sent == []
