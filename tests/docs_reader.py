"""How a documentation page's code blocks run, on the real emulator, as a reader would run them.

A page's blocks run in order, in one Python namespace and one fresh working folder, with
``FIRESTORE_EMULATOR_HOST`` naming the session's emulator and ``GOOGLE_CLOUD_PROJECT`` a
project of the page's own (the emulator keeps projects apart), so pages cannot see each
other's documents. What a block is, is said by its language and by an HTML comment on the
line before its fence:

- ```` ```python ````: executed.
- ```` ```console ````: ``$ `` lines are commands (a trailing ``\\`` continues one), the lines
  after a command up to the next are its standard output (and its standard error when it
  fails), compared with what it printed (``...`` stands for any text); a command whose shown
  output holds ``Error:`` must fail, and a last line ``[exit N]`` says which exit code it must
  give.
  ``tsstore ...`` runs in this process, ``python``/``pytest`` as processes (``$NAME`` in
  their words is the variable's value), ``export A=B`` and ``cd DIR`` change what the next
  commands see.
- ``<!-- file: PATH -->`` before any block: the block is written to PATH (a declaration, a
  module a later command names, a test file) instead of being run.
- ``<!-- output -->`` before a block: what the previous block printed, compared as above.
- ``<!-- not run: REASON -->``: a block the tests cannot run (it installs software or needs
  Google Cloud); the reason is required, and such blocks are few (counted below).

Any other block fails the test: a page cannot hold an example nobody runs.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.cli import tsstore

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)
MARKER = re.compile(r"<!--\s*(file|output|not run)\s*:?\s*(.*?)\s*-->")
FENCE = re.compile(r"^(`{3,})(\S*)[^\n]*\n(.*?)^\1\s*$", re.S | re.M)
NOT_RUN_AT_MOST = 12  # across the site; each one says why


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    code: str
    marker: str  # "", "file", "output" or "not run"
    argument: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(DOCS.parent)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for fence in FENCE.finditer(text):
        if fence.group(2).startswith("{"):
            continue  # a MyST directive ({toctree}, {note}, ...), not code
        before = text[: fence.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marked = MARKER.fullmatch(before.strip())
        found.append(
            Block(
                page=page,
                line=text.count("\n", 0, fence.start()) + 1,
                language=fence.group(2),
                code=fence.group(3),
                marker=marked.group(1) if marked else "",
                argument=marked.group(2) if marked else "",
            )
        )
    return found


def matches(expected: str, actual: str) -> bool:
    """``expected`` equals ``actual`` line by line (trailing spaces aside), ``...`` matching anything."""

    def norm(text: str) -> str:
        return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())

    pattern = ".*?".join(re.escape(part) for part in norm(expected).split("..."))
    return re.fullmatch(pattern, norm(actual), re.S) is not None


def commands(code: str) -> list[tuple[str, str]]:
    """A console block's ``$`` commands, each with the output shown after it."""
    found: list[tuple[str, list[str]]] = []
    lines = code.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command[:-1] + " " + lines[i].strip()
            found.append((command, []))
        else:
            assert found, f"console output before any `$ ` command: {line!r}"
            found[-1][1].append(line)
        i += 1
    return [(command, "\n".join(out)) for command, out in found]


class Reader:
    """One page's run: its namespace, folder and environment, and what its last block printed."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.folder, self.env = folder, env
        self.namespace: dict[str, Any] = {"__name__": "__docs__"}
        self.printed = ""

    def python(self, block: Block) -> None:
        out = io.StringIO()
        with contextlib.chdir(self.folder), contextlib.redirect_stdout(out), patched_environ(self.env):
            sys.path.insert(0, str(self.folder))
            try:
                exec(compile(block.code, block.where, "exec"), self.namespace)
            finally:
                sys.path.remove(str(self.folder))
        self.printed = out.getvalue()

    def console(self, block: Block) -> None:
        for command, shown in commands(block.code):
            printed, code = self.run(command, block)
            exit_line = re.search(r"\n?\[exit (\d+)\]\s*$", shown)
            if exit_line:
                shown = shown[: exit_line.start()]
            expected = int(exit_line.group(1)) if exit_line else None
            ok = code == expected if expected is not None else (code != 0) == ("Error:" in shown)
            assert ok, f"{block.where}: `{command}` exited {code}:\n{printed}"
            if shown.strip():
                assert matches(shown, printed), f"{block.where}: `{command}` printed\n{printed}\nnot\n{shown}"
            self.printed = printed

    def run(self, command: str, block: Block) -> tuple[str, int]:
        words = shlex.split(command)
        if words[0] == "export":
            for assignment in words[1:]:
                name, _, value = assignment.partition("=")
                self.env[name] = value
            return "", 0
        if words[0] == "cd":
            self.folder = (self.folder / words[1]).resolve()
            return "", 0
        if words[0] == "tsstore":
            ran = tsstore(*words[1:], env=self.env, cwd=self.folder)
            return ran.stdout + (ran.stderr if ran.returncode else ""), ran.returncode
        if words[0] in ("python", "pytest"):
            program = [sys.executable] + (["-m", "pytest", "-p", "no:cacheprovider"] if words[0] == "pytest" else [])
            environ = {**os.environ, **self.env}
            words = [re.sub(r"\$(\w+)", lambda found: environ[found.group(1)], word) for word in words]  # as a shell
            # the page's folder first, then the run's own path (a checkout run with PYTHONPATH=$PWD
            # beside an installed tsstore: the page's commands import the checkout's, as its blocks do)
            environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.folder), environ.get("PYTHONPATH")]))
            done = subprocess.run(program + words[1:], cwd=self.folder, env=environ, capture_output=True, text=True,
                                  timeout=300)  # fmt: skip
            return done.stdout + (done.stderr if done.returncode else ""), done.returncode
        raise AssertionError(f"{block.where}: the tests cannot run `{command}`: mark the block <!-- not run: why -->")


@contextlib.contextmanager
def patched_environ(env: dict[str, str]) -> Any:
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def project_of(page: Path) -> str:
    """The page's own project on the emulator (a valid project id, one per page)."""
    slug = re.sub(r"[^a-z0-9]+", "-", str(page.relative_to(DOCS.parent).with_suffix("")).lower()).strip("-")
    return slug[:30].rstrip("-")


def page_env(emulator: Any, page: Path, folder: Path, datastore: Any = None) -> dict[str, str]:
    """The environment of a page's blocks: the session's emulator (and, for a page about
    Datastore mode, its Datastore-mode one), a project of the page's own, a home of its own."""
    return {
        **({"DATASTORE_EMULATOR_HOST": datastore.address} if datastore is not None else {}),
        "FIRESTORE_EMULATOR_HOST": emulator.address,
        "GOOGLE_CLOUD_PROJECT": project_of(page),
        "TSSTORE_HOME": str(folder / ".tsstore-home"),  # never the developer's own local store
        "MPLBACKEND": "Agg",
    }
