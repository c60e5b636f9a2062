"""A model as the one-line calls and sessions name it, ``"provider:model"``: split into its
stack and the provider's model name, or refused with a ConfigError that says what was meant
(a bare model name with the stack whose catalog lists it, LiteLLM's ``provider/model``, a
models.yaml name, a route)."""

from __future__ import annotations

from metis.errors import ConfigError


def stack_and_model(model: str) -> tuple[str, str]:
    """``"provider:model"`` split, or a ConfigError saying what was expected."""
    if not isinstance(model, str):
        raise ConfigError(
            "expected a model as 'provider:model' (e.g. anthropic:claude-sonnet-4-5) or a "
            f"Router, got {type(model).__name__}"
        )
    stack_name, sep, wire = model.partition(":")
    if not sep or not stack_name or not wire:
        meant = _with_provider(model) if not sep else None
        hint = f"; did you mean {meant!r}?" if meant else _REGISTRY_NAME.format(model)
        raise ConfigError(
            "expected a model as 'provider:model' (e.g. anthropic:claude-sonnet-4-5), "
            f"got {model!r}{hint}"
        )
    if stack_name == "route":  # what a Router's requests are named, not a stack
        raise ConfigError(
            f"{model!r} names a route; a call takes the route as its Router: "
            f"metis.complete(Registry.load(path).router({wire!r}), ...), or a Router([...])"
        )
    return stack_name, wire


_REGISTRY_NAME = (
    "; a name of a models.yaml goes through its Registry: registry.request({0!r}, ...), or a "
    "route's Router: metis.complete(registry.router(name), ...) (docs/models-yaml.md)"
)


_FIRST_PARTY = ("anthropic", "openai", "gemini", "mistral", "xai", "deepseek", "groq", "bedrock")


def _with_provider(name: str) -> str | None:
    """A bare model name with the first first-party stack whose catalog lists it (the
    model's maker before a cloud that also serves it); a provider written before a slash, as
    LiteLLM writes it (``azure/gpt-4o``, ``vertex_ai/gemini-2.5-flash``), as that stack."""
    from metis.catalog.lookup import find_model
    from metis.stacks.catalog import stack_catalog_provider
    from metis.stacks.loader import builtin_stacks, stacks_meant

    provider, slash, model = name.partition("/")
    if slash and model:
        meant = stacks_meant(provider, builtin_stacks())
        if meant:
            return f"{meant[0]}:{model}"

    for stack in _FIRST_PARTY:
        catalog = stack_catalog_provider(stack)
        if catalog and find_model(catalog, name) is not None:
            return f"{stack}:{name}"
    return None
