"""url_params: fills the ``{placeholders}`` of a stack's URL (a project, a region, a resource).

A cloud platform's endpoint names the caller's own resources: Vertex AI's has a project and a
location, Azure OpenAI's a resource name. The stack writes them as placeholders and says where
each value comes from::

    - url_params:
        params:
          project: [GOOGLE_CLOUD_PROJECT]           # environment variables, first set wins
          location: [GOOGLE_CLOUD_LOCATION, CLOUD_ML_REGION]
        hosts: {global-aiplatform.googleapis.com: aiplatform.googleapis.com}

The adapter's setting of that name (``project``, ``location``, ``resource``: its stack's kind of
settings) wins over the variables. A value that is missing raises
NotConfiguredError naming the option and the variables to set, and a value that could change
the URL's shape (a ``/``, a ``?``, a space) a ConfigError, both before anything is sent.
``hosts`` then renames a host the substitution made (Vertex's global location has no
``global-`` host). A URL with no placeholders left (a ``base_url`` given in full) passes as is.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict

from metis.errors import ConfigError
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.pipeline.services import StageServices
from metis.pipeline.stage import RequestStage

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class UrlParams(RequestStage[WireRequest]):
    name = "url_params"
    role = "auth"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

        params: dict[str, list[str]] = {}
        """Each placeholder's environment variables, in order of preference."""
        hosts: dict[str, str] = {}
        """Hosts to rename after the substitution."""

    options: Options
    _options: Mapping[str, Any] = MappingProxyType({})

    def bind(self, services: StageServices) -> None:
        self._options = services.settings.as_mapping()

    def rewrite(self, request: WireRequest, call: Call) -> WireRequest:
        if "{" not in request.url:
            return request
        url = _PLACEHOLDER.sub(lambda m: self._value(m.group(1), call), request.url)
        for host, replacement in self.options.hosts.items():
            url = url.replace(f"://{host}/", f"://{replacement}/", 1)
        return dataclasses.replace(request, url=url)

    def _value(self, name: str, call: Call) -> str:
        variables = self.options.params.get(name)
        if variables is None:
            raise ConfigError(
                f"{call.provider}: the endpoint has a placeholder {{{name}}} that stage "
                f"url_params does not know; known: {', '.join(self.options.params) or 'none'}"
            )
        value = _configured(self._options, name) or _first_set(os.environ, variables)
        if not value:
            raise _not_configured(call, name, variables)
        if not _SAFE_VALUE.match(value):
            raise ConfigError(
                f"{call.provider}: {name} {value!r} is not a valid {name} (letters, digits, "
                "'.', '_' and '-' only)"
            )
        return value


def _configured(options: Mapping[str, object], name: str) -> str | None:
    value = options.get(name)
    return value if isinstance(value, str) and value else None


def _first_set(environ: Mapping[str, str], variables: list[str]) -> str | None:
    return next((environ[v] for v in variables if environ.get(v)), None)


def _not_configured(call: Call, name: str, variables: list[str]) -> ConfigError:
    from metis.errors import NotConfiguredError

    where = " or ".join(variables) if variables else "no environment variable"
    return NotConfiguredError(
        f"{call.provider} needs a {name} for its endpoint: set {where}, or pass "
        f"settings={{{name!r}: ...}}, or a base_url with no placeholders",
        model=call.model,
        adapter=call.provider,
        api_key_env=variables[0] if variables else None,
    )
