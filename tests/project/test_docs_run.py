"""Every code block of README.md and docs/*.md runs as written, offline.

Each fenced block says its language. ``python`` blocks run as scripts in a fresh interpreter
from the repository's root, with the official SDKs' variables (``ANTHROPIC_BASE_URL``,
``OPENAI_BASE_URL``, ``GOOGLE_GEMINI_BASE_URL`` and the keys) pointing at the emulator. ``yaml``
blocks are loaded by what they are: a stack file, a models.yaml, a price table. In ``sh``
blocks the ``metis`` commands run (installing, the test suite and cloud logins are the
environment, not run here). ``text`` blocks are output and pictures, not code.

A block that needs what no test has (a live key, a Redis server, a cloud account) says so in
its first line, ``# needs: <what>``, where the reader sees it; in a shell block a command may
carry the same comment. Such blocks are compiled or parsed but not run, and they stay few.
A ``dockerfile`` block is the checkout's ``Dockerfile`` (no test has a Docker daemon): the same
text, every file it copies there, and ``.dockerignore`` keeping the checkout's own virtual
environment and git history out of the image.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from metis.testing.emulator import Emulator

ROOT = Path(__file__).parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGES = {"python", "yaml", "sh", "text", "dockerfile"}
NEEDS = re.compile(r"#\s*needs:\s*(\S.*)")
MAX_NEEDING = 4
TIMEOUT = 120


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    language: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def needs(self) -> str | None:
        first = self.code.lstrip().splitlines()[0] if self.code.strip() else ""
        found = NEEDS.match(first)
        return found.group(1) if found else None


def blocks(path: Path) -> Iterator[Block]:
    """Each fenced block, an indented one (in a list item) too, its indentation taken off."""
    fence: tuple[int, str, int] | None = None
    lines: list[str] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        indent = len(line) - len(line.lstrip(" "))
        if fence is None and line.lstrip(" ").startswith("```"):
            fence, lines = (number, line.strip()[3:].strip(), indent), []
        elif fence is not None and line.lstrip(" ").startswith("```"):
            yield Block(path, fence[0], fence[1], "\n".join(lines) + "\n")
            fence = None
        elif fence is not None:
            lines.append(line[min(indent, fence[2]) :])
    assert fence is None, f"{path.name}:{fence[0]}: a code block that never ends"


ALL = [block for path in DOCUMENTS for block in blocks(path)]


def of(language: str) -> list[Block]:
    return [b for b in ALL if b.language == language]


def ids(found: list[Block]) -> list[str]:
    return [b.where for b in found]


def test_every_block_says_its_language() -> None:
    assert [b.where for b in ALL if b.language not in LANGUAGES] == []


@pytest.mark.parametrize("block", of("dockerfile"), ids=ids(of("dockerfile")))
def test_a_dockerfile_block_is_the_checkouts_dockerfile(block: Block) -> None:
    assert block.code == (ROOT / "Dockerfile").read_text(encoding="utf-8")
    for line in block.code.splitlines():
        if line.startswith("COPY "):
            source = line.split()[1]
            assert (ROOT / source).exists(), f"{block.where}: COPY {source}: no such file"
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    assert {".venv", ".git"} <= set(ignored)


def test_blocks_that_need_a_live_service_say_what_and_are_few() -> None:
    needing = [f"{b.where}: {b.needs}" for b in ALL if b.needs]
    assert len(needing) <= MAX_NEEDING, needing


@pytest.fixture(scope="module")
def environment(
    emulator_server: Emulator, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """The variables a reader would set, pointing at the emulator; no real key or cloud."""
    cleared = ("_API_KEY", "_BASE_URL")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(cleared) and not k.startswith(("AWS_", "AZURE_", "GOOGLE_"))
    }
    url = emulator_server.url
    env.update(
        ANTHROPIC_BASE_URL=url,
        OPENAI_BASE_URL=f"{url}/v1",
        GOOGLE_GEMINI_BASE_URL=url,
        ANTHROPIC_API_KEY="test-key",
        OPENAI_API_KEY="test-key",
        GEMINI_API_KEY="test-key",
        XDG_CACHE_HOME=str(tmp_path_factory.mktemp("cache")),
        PYTHONPATH=str(ROOT),
    )
    return env


def run(command: list[str], env: dict[str, str], where: str) -> str:
    """What ``command`` printed, once it has succeeded."""
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 0, f"{where} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done.stdout


PRINTS = re.compile(r"^\s*print\(.*\)\s+# prints: (.*?)(?: \([^()]*\))?$")
"""A line of a block whose comment shows what it prints (a parenthesis after it is a note)."""


def shown_prints(block: Block) -> list[str]:
    return [found.group(1) for line in block.code.splitlines() if (found := PRINTS.match(line))]


@pytest.mark.slow
@pytest.mark.parametrize("block", of("python"), ids=ids(of("python")))
def test_a_python_block_runs(block: Block, environment: dict[str, str]) -> None:
    """It succeeds, and each ``# prints: ...`` it shows is a line of its output, in order."""
    ast.parse(block.code, block.where)  # a SyntaxError names the document's block
    if block.needs:
        pytest.skip(f"needs {block.needs}")
    printed = run([sys.executable, "-c", block.code], environment, block.where).splitlines()
    rest = iter(printed)
    missing = [shown for shown in shown_prints(block) if shown not in rest]
    assert missing == [], f"{block.where} printed {printed}"


def test_the_docs_show_what_their_prints_print() -> None:
    """Outputs shown in a block are marked ``# prints:`` (so the run above checks them)."""
    marked = [f"{b.where}: {shown}" for b in of("python") for shown in shown_prints(b)]
    assert len(marked) >= 5, marked


@pytest.mark.parametrize("block", of("python"), ids=ids(of("python")))
def test_a_python_block_compiles(block: Block) -> None:
    ast.parse(block.code, block.where)


@pytest.mark.slow
@pytest.mark.parametrize("block", of("sh"), ids=ids(of("sh")))
def test_the_metis_commands_of_a_shell_block_run(block: Block, environment: dict[str, str]) -> None:
    commands = [line for line in block.code.splitlines() if line.startswith("metis ")]
    if block.needs:
        pytest.skip(f"needs {block.needs}")
    venv_bin = str(Path(sys.executable).parent)
    env = {**environment, "PATH": venv_bin + os.pathsep + environment.get("PATH", "")}
    for line in commands:
        if NEEDS.search(line):
            continue
        run(shlex.split(line, comments=True), env, f"{block.where}: {line}")


@pytest.mark.parametrize("block", of("yaml"), ids=ids(of("yaml")))
def test_a_yaml_block_loads_as_what_it_is(block: Block, tmp_path: Path) -> None:
    """An excerpt (a first line ``# path/of/a/file.yaml``) is in that file as shown; any other
    block is a whole stack file or models.yaml, and loads."""
    from metis.registry import Registry
    from metis.stacks.loader import load_stack

    data = yaml.safe_load(block.code)
    assert isinstance(data, dict), block.where
    excerpt = EXCERPT.match(block.code)
    if excerpt:
        with open(ROOT / excerpt.group(1), encoding="utf-8") as file:
            whole = yaml.safe_load(file)
        assert shown_in(data, whole), f"{block.where} is not what {excerpt.group(1)} says"
        return
    if "gateway" in data:  # a gateway's file (docs/gateway.md), its variables all set
        from metis.gateway.config import GatewayConfig

        if "models" not in data:  # a gateway: section alone, over the example's models
            with open(ROOT / "examples" / "gateway.yaml", encoding="utf-8") as file:
                data = {**yaml.safe_load(file), "gateway": data["gateway"]}
        GatewayConfig.from_dict(data, block.where, environ=EveryVariable())
        return
    path = tmp_path / ("models.yaml" if "models" in data or "routes" in data else "stack.yaml")
    path.write_text(block.code, encoding="utf-8")
    if path.name == "stack.yaml":
        load_stack(path).build_pipeline()
    else:
        Registry.load(path)


class EveryVariable(dict[str, str]):
    """An environment in which every variable a block names is set."""

    def get(self, key: str, default: object = None) -> str:  # type: ignore[override]
        return f"value-of-{key}"

    def __getitem__(self, key: str) -> str:
        return f"value-of-{key}"

    def __contains__(self, key: object) -> bool:
        return True


EXCERPT = re.compile(r"#\s*([\w./-]+\.ya?ml)\s*(?:\n|$)")


def shown_in(shown: object, whole: object) -> bool:
    """Whether every key ``shown`` has is in ``whole`` with the same value (lists whole)."""
    if isinstance(shown, dict):
        return isinstance(whole, dict) and all(
            key in whole and shown_in(value, whole[key]) for key, value in shown.items()
        )
    return shown == whole


def test_a_shown_emulator_banner_is_the_emulators() -> None:
    """A ``text`` block showing ``$ metis emulator`` and its banner lists the endpoints as the
    command prints them (docs/emulator.md), so the picture cannot drift from the code."""
    from metis.testing.emulator.cli import endpoints

    shown = [b for b in of("text") if b.code.startswith("$ metis emulator")]
    assert shown, "no document shows the emulator's banner"
    for block in shown:
        lines = block.code.rstrip("\n").splitlines()
        assert lines[1].startswith("metis emulator listening on http://127.0.0.1:"), block.where
        assert "\n".join(lines[2:]) == endpoints(), f"{block.where} is not the banner"


SERVE_BOUND = 600  # lines read before giving up on a banner: a bound, not a timing


def _assignments(line: str) -> tuple[dict[str, str], list[str]]:
    """A shell line's leading ``NAME=value`` words, and the command after them."""
    words = shlex.split(line, comments=True)
    env: dict[str, str] = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    return env, words


@pytest.mark.slow
def test_the_readmes_gateway_quick_start_serves_its_client(environment: dict[str, str]) -> None:
    """README.md's three lines, as a reader runs them: the gateway started with the line's
    variables (on a free port: the file's 4000 may be taken), then the client line's requests
    as Claude Code makes them (its model and its background model, the gateway's key), which
    the gateway answers from the providers its file names (here the emulator); another key is
    refused."""
    import httpx

    (block,) = [b for b in of("sh") if "metis serve" in b.code and b.path.name == "README.md"]
    serve_line, client_line = (
        next(line for line in block.code.splitlines() if marker in line)
        for marker in ("metis serve", "ANTHROPIC_BASE_URL=")
    )
    serve_env, command = _assignments(serve_line)
    client_env, client = _assignments(client_line)
    assert command[:2] == ["metis", "serve"] and client == ["claude"]
    venv_bin = str(Path(sys.executable).parent)
    env = {**environment, **serve_env, "PATH": venv_bin + os.pathsep + environment["PATH"]}
    process = subprocess.Popen(
        [*command, "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        said: list[str] = []
        while len(said) < SERVE_BOUND and not any("listening on" in line for line in said[-1:]):
            said.append(process.stdout.readline())  # "" once it has exited
            assert said[-1], "".join(said)
        banner = said[-1]
        assert "metis serve listening on" in banner, "".join(said)
        url = re.search(r"http://[\d.]+:\d+", banner)
        assert url and client_env["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1:")
        key = {"x-api-key": client_env["ANTHROPIC_API_KEY"], "anthropic-version": "2023-06-01"}
        for model in (client_env["ANTHROPIC_MODEL"], client_env["ANTHROPIC_DEFAULT_HAIKU_MODEL"]):
            body = {
                "model": model,
                "max_tokens": 64,
                "messages": [{"role": "user", "content": "Hi"}],
            }
            reply = httpx.post(url.group() + "/v1/messages", json=body, headers=key, timeout=60)
            assert reply.status_code == 200, reply.text
            assert reply.json()["content"][0]["text"] == "You said: Hi"
        wrong = httpx.post(
            url.group() + "/v1/messages", json=body, headers={**key, "x-api-key": "x"}, timeout=60
        )
        assert wrong.status_code == 401
    finally:
        process.terminate()
        process.wait(timeout=TIMEOUT)


def test_the_readmes_emulator_variables_are_the_ones_its_help_gives() -> None:
    """README.md's ``export`` lines pointing the SDKs at the emulator are the ones
    ``metis emulator --help`` prints, so a reader finds the same in either place."""
    from metis.testing.emulator.cli import POINTING

    exports = [
        line
        for block in of("sh")
        if block.path.name == "README.md"
        for line in block.code.splitlines()
        if line.startswith("export ") and ":8900" in line
    ]
    assert exports == [line.strip() for line in POINTING.splitlines() if "export " in line]


def test_the_assembled_stack_docs_stacks_shows_is_what_metis_stack_prints(tmp_path: Path) -> None:
    """docs/stacks.md's picture of its whole-stack example, assembled: each row's number,
    stage, kind and the file that set it are the columns ``metis stack`` prints for that stack
    (a parenthesis after the file is the page's note, not output)."""
    from metis.cli.stack import describe, kind_text
    from metis.stacks.loader import load_stack

    page = [b for b in ALL if b.path.name == "stacks.md"]
    (example,) = [b for b in page if b.language == "yaml" and b.code.startswith("name: anthropic")]
    (picture,) = [b for b in page if b.language == "text" and b.code.startswith(" 1  invariants")]
    path = tmp_path / "anthropic.yaml"
    path.write_text(example.code, encoding="utf-8")
    spec = load_stack(path)
    stages = {stage.name: stage for stage in spec.build_pipeline().stages}
    printed = [
        f"{view.index}  {view.name}  {kind_text(stages[view.name])}  "
        + spec.stage_sources.get(view.name, spec.source).rsplit("/", 1)[-1]
        for view in describe(spec)
    ]
    shown = [
        re.sub(r"(\.yaml) \([^()]*\)$", r"\1", re.sub(r"\s{2,}", "  ", line.strip()))
        for line in picture.code.splitlines()
    ]
    assert shown == printed, picture.where
