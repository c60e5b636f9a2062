"""The python blocks of README.md and docs/*.md type-check (mypy --strict), as a user's copy of
them would be checked: a block that does not (an unannotated ``events = []``, a stage whose
``Options`` mypy cannot see, an optional reply read without a check) teaches code that fails a
typed project's CI. The blocks that show a mistake on purpose are the only errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).parents[2]
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)

MISTAKES = {
    ("contract.md", 'Unexpected keyword argument "temprature"'),
    ("calls.md", 'Unexpected keyword argument "max_tokens"'),
    ("calls.md", 'No overload variant of "complete" matches'),
}
"""The errors of the blocks that show what a misspelt option does, as a type checker says it."""


@pytest.mark.slow
def test_the_docs_python_blocks_type_check(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    files: dict[str, str] = {}
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for index, block in enumerate(BLOCK.findall(page.read_text(encoding="utf-8"))):
            name = f"{page.stem.replace('-', '_')}_{index}.py"
            (tmp_path / name).write_text(block, encoding="utf-8")
            files[name] = page.name
    # The project's mypy cache and settings, as `mypy metis examples` leaves them: only the
    # blocks are checked, not metis and its dependencies again (tests/calls/test_tool_typing.py).
    root = request.config.rootpath
    cache = root / ".mypy_cache" if request.config.cache else tmp_path / "c"
    settings = ["--config-file", str(root / "pyproject.toml"), "--strict", "--no-error-summary"]
    out, err, _ = api.run(
        [*settings, "--cache-dir", str(cache), "--python-version", "3.11"]
        + [str(tmp_path / name) for name in files]
    )
    errors = [line for line in out.splitlines() if ": error: " in line]
    unexpected = [
        line
        for line in errors
        if not any(
            files[Path(line.split(":")[0]).name] == page and said in line for page, said in MISTAKES
        )
    ]
    assert unexpected == [], "\n".join(unexpected) + err
    assert len(errors) == len(MISTAKES), "\n".join(errors)
