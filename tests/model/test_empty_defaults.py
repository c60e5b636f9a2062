"""The models made per call start their empty lists and dicts from a factory (docs/engine.md):
pydantic deep-copies a plain ``[]`` or ``{}`` default for every instance that omits it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pydantic
import pytest

import metis.model
import metis.sessions
from metis.core.empty import empty_dict, empty_list
from metis.model.content import ToolUseBlock
from metis.model.request import CanonicalRequest


def _models() -> list[type[pydantic.BaseModel]]:
    found: dict[str, type[pydantic.BaseModel]] = {}
    for package in (metis.model, metis.sessions):
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            module = importlib.import_module(info.name)
            for name, value in vars(module).items():
                if (
                    inspect.isclass(value)
                    and issubclass(value, pydantic.BaseModel)
                    and value.__module__ == module.__name__
                ):
                    found[f"{module.__name__}.{name}"] = value
    return list(found.values())


MODELS = _models()


def test_the_scan_finds_the_per_call_models() -> None:
    assert CanonicalRequest in MODELS and ToolUseBlock in MODELS


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model.__qualname__)
def test_no_field_defaults_to_a_shared_mutable_value(model: type[pydantic.BaseModel]) -> None:
    mutable = {
        name
        for name, field in model.model_fields.items()
        if isinstance(field.default, (list, dict, set, bytearray))
    }
    assert not mutable, f"{model.__qualname__}: {sorted(mutable)} default to a copied value"


def test_each_instance_gets_its_own_empty_value() -> None:
    first = CanonicalRequest(model="m", messages=[], max_output_tokens=1)
    second = CanonicalRequest(model="m", messages=[], max_output_tokens=1)
    first.stop_sequences.append("x")
    first.provider_options["openai"] = {}
    assert second.stop_sequences == [] and second.provider_options == {}
    assert empty_list() is not empty_list() and empty_dict() is not empty_dict()
