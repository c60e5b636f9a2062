"""A stage's options: validated when it is built, and a stage given none takes the defaults
without building its options model's validator (``defer_build``; benchmarks/README.md)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, model_validator

from metis.errors import StackError
from metis.pipeline.stage import Stage


def stage_with(options: type[BaseModel]) -> type[Stage[Any, Any, Any, Any]]:
    class Probe(Stage[Any, Any, Any, Any]):
        name = "probe"
        Options = options

    return Probe


class Defaults(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    level: int = 3
    tags: list[str] = []


def test_a_stage_given_no_options_takes_the_defaults_without_building_a_validator() -> None:
    class Fresh(Defaults):
        pass

    options = stage_with(Fresh)().options
    assert isinstance(options, Fresh)
    assert not Fresh.__pydantic_complete__
    assert (options.level, options.tags, options.model_fields_set) == (
        3,
        [],
        set(),
    )
    assert options == Fresh()


def test_an_unknown_option_is_still_refused() -> None:
    said = r"stage 'probe': unknown option 'levle'; did you mean 'level'\?"
    with pytest.raises(StackError, match=said):
        stage_with(Defaults)(levle=4)


def test_a_required_option_left_out_is_still_refused() -> None:
    class Required(BaseModel):
        model_config = ConfigDict(extra="forbid", defer_build=True)
        codec: str

    with pytest.raises(StackError, match=r"option 'codec': Field required"):
        stage_with(Required)()


def test_a_model_validator_still_runs_on_the_defaults() -> None:
    class Checked(BaseModel):
        model_config = ConfigDict(extra="forbid", defer_build=True)
        low: int = 5
        high: int = 1

        @model_validator(mode="after")
        def _ordered(self) -> Checked:
            if self.low > self.high:
                raise ValueError("low above high")
            return self

    with pytest.raises(StackError, match="low above high"):
        stage_with(Checked)()
