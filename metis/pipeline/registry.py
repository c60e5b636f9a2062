"""Stage names to stage classes. Built-ins are imported only when a stack names them."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from metis.errors import StackError

if TYPE_CHECKING:
    from metis.pipeline.stage import Stage

StageClass: TypeAlias = "type[Stage[Any, Any, Any, Any]]"
S = TypeVar("S", bound="type[Stage[Any, Any, Any, Any]]")

_BUILTIN: dict[str, str] = {
    "invariants": "metis.stages.policy.invariants:Invariants",
    "capability_check": "metis.stages.policy.capability_check:CapabilityCheck",
    "system_hoist": "metis.stages.policy.system_hoist:SystemHoist",
    "empty_content": "metis.stages.policy.empty_content:EmptyContent",
    "tool_ids": "metis.stages.policy.tool_ids:ToolIds",
    "thinking_filter": "metis.stages.policy.thinking_filter:ThinkingFilter",
    "thinking_turn": "metis.stages.edits.thinking_turn:ThinkingTurn",
    "tool_result_check": "metis.stages.policy.tool_result_check:ToolResultCheck",
    "encode": "metis.stages.codec.encode:Encode",
    "strict_schema": "metis.stages.edits.strict_schema:StrictSchema",
    "cache_control": "metis.stages.edits.cache_control:CacheControl",
    "include_usage": "metis.stages.edits.include_usage:IncludeUsage",
    "normalize": "metis.stages.codec.normalize:Normalize",
    "decode": "metis.stages.codec.decode:Decode",
    "transport": "metis.transport.stage:Transport",
    "websocket_transport": "metis.transport.ws_stage:WebSocketTransport",
    "retry": "metis.stages.control.retry:Retry",
    "telemetry": "metis.stages.control.telemetry:Telemetry",
    "continuation": "metis.stages.edits.continuation:Continuation",
    "ollama_lifecycle": "metis.stages.local.ollama_lifecycle:OllamaLifecycle",
    "tool_shim": "metis.stages.policy.tool_shim:ToolShim",
    "schema_cleanup": "metis.stages.edits.schema_cleanup:SchemaCleanup",
    "pre_send_check": "metis.stages.edits.pre_send_check:PreSendCheck",
    "wire_fields": "metis.stages.edits.wire_fields:WireFields",
    "aws_endpoint": "metis.stages.auth.aws_endpoint:AwsEndpoint",
    "aws_sigv4": "metis.stages.auth.aws_sigv4:AwsSigV4",
    "url_params": "metis.stages.auth.url_params:UrlParams",
    "google_auth": "metis.stages.auth.google_auth:GoogleAuth",
    "azure_auth": "metis.stages.auth.azure_auth:AzureAuth",
}


class StageRegistry:
    def __init__(self, builtins: dict[str, str] | None = None) -> None:
        self._lazy = dict(builtins or {})
        self._builtin = frozenset(self._lazy)
        self._registered: set[str] = set()
        self._classes: dict[str, StageClass] = {}

    def register(self, cls: S, name: str | None = None) -> S:
        key = name or cls.name
        if not key:
            raise StackError(f"{cls.__name__} has no name; set the class attribute 'name'")
        from metis.pipeline.stage import Stage  # a stage being registered has loaded it

        if not (isinstance(cls, type) and issubclass(cls, Stage)):
            raise StackError(f"{cls!r} is not a Stage subclass")
        self._classes[key] = cls
        self._registered.add(key)
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

    def is_builtin(self, name: str) -> bool:
        """Whether ``name`` is a built-in stage of this registry, not replaced by a class of
        the application's (its declaration then speaks for it: metis/stacks/deferred.py)."""
        return name in self._builtin and name not in self._registered

    def names(self) -> list[str]:
        return sorted({*self._classes, *self._lazy})

    def build(self, name: str, options: dict[str, Any] | None = None) -> Stage[Any, Any, Any, Any]:
        return self.get(name)(**(options or {}))


stages = StageRegistry(_BUILTIN)


def register_stage(cls: S) -> S:
    """Class decorator: make a stage available to stacks by its ``name``. A built-in stage's
    name is a StackError: registering it would change every stack that uses the built-in."""
    name = getattr(cls, "name", None)
    if name in _BUILTIN:
        raise StackError(
            f"{name!r} names a built-in stage: registering {cls.__name__} under it would put it "
            f"in every stack that uses {name}; name yours differently and put it in its place "
            f"(stages: {{replace: {{{name}: my_{name}}}}} in a stack that extends one, or "
            f"adapter.pipeline.replace({name!r}, {cls.__name__}()))"
        )
    return stages.register(cls)
