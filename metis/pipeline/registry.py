"""Stage names to stage classes. Built-ins are imported only when a stack names them."""

from __future__ import annotations

import importlib
from typing import Any, TypeVar

from metis.errors import StackError
from metis.pipeline.stage import Stage

StageClass = type[Stage[Any, Any, Any, Any]]
S = TypeVar("S", bound=StageClass)

_BUILTIN: dict[str, str] = {
    "invariants": "metis.stages.invariants:Invariants",
    "capability_check": "metis.stages.capability_check:CapabilityCheck",
    "system_hoist": "metis.stages.system_hoist:SystemHoist",
    "empty_content": "metis.stages.empty_content:EmptyContent",
    "tool_ids": "metis.stages.tool_ids:ToolIds",
    "thinking_filter": "metis.stages.thinking_filter:ThinkingFilter",
    "thinking_turn": "metis.stages.thinking_turn:ThinkingTurn",
    "tool_result_check": "metis.stages.tool_result_check:ToolResultCheck",
    "encode": "metis.stages.encode:Encode",
    "strict_schema": "metis.stages.strict_schema:StrictSchema",
    "cache_control": "metis.stages.cache_control:CacheControl",
    "include_usage": "metis.stages.include_usage:IncludeUsage",
    "normalize": "metis.stages.normalize:Normalize",
    "decode": "metis.stages.decode:Decode",
    "transport": "metis.stages.transport:Transport",
    "retry": "metis.stages.retry:Retry",
    "telemetry": "metis.stages.telemetry:Telemetry",
    "continuation": "metis.stages.continuation:Continuation",
    "ollama_lifecycle": "metis.stages.ollama_lifecycle:OllamaLifecycle",
    "tool_shim": "metis.stages.tool_shim:ToolShim",
    "schema_cleanup": "metis.stages.schema_cleanup:SchemaCleanup",
    "pre_send_check": "metis.stages.pre_send_check:PreSendCheck",
    "wire_fields": "metis.stages.wire_fields:WireFields",
    "aws_endpoint": "metis.stages.aws_endpoint:AwsEndpoint",
    "aws_sigv4": "metis.stages.aws_sigv4:AwsSigV4",
    "url_params": "metis.stages.url_params:UrlParams",
    "google_auth": "metis.stages.google_auth:GoogleAuth",
    "azure_auth": "metis.stages.azure_auth:AzureAuth",
}


class StageRegistry:
    def __init__(self, builtins: dict[str, str] | None = None) -> None:
        self._lazy = dict(builtins or {})
        self._classes: dict[str, StageClass] = {}

    def register(self, cls: S, name: str | None = None) -> S:
        key = name or cls.name
        if not key:
            raise StackError(f"{cls.__name__} has no name; set the class attribute 'name'")
        if not (isinstance(cls, type) and issubclass(cls, Stage)):
            raise StackError(f"{cls!r} is not a Stage subclass")
        self._classes[key] = cls
        self._lazy.pop(key, None)
        return cls

    def get(self, name: str) -> StageClass:
        if name in self._classes:
            return self._classes[name]
        if name in self._lazy:
            module, _, attr = self._lazy[name].partition(":")
            cls: StageClass = getattr(importlib.import_module(module), attr)
            self._classes[name] = cls
            return cls
        raise StackError(f"unknown stage {name!r}; known stages: {', '.join(self.names())}")

    def names(self) -> list[str]:
        return sorted({*self._classes, *self._lazy})

    def build(self, name: str, options: dict[str, Any] | None = None) -> Stage[Any, Any, Any, Any]:
        return self.get(name)(**(options or {}))


stages = StageRegistry(_BUILTIN)


def register_stage(cls: S) -> S:
    """Class decorator: make a stage available to stacks by its ``name``."""
    return stages.register(cls)
