"""Every code block of the documentation site runs, on the real emulator, as a reader would run it.

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
import html.parser
import io
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest

from tests.cli import tsstore
from tsstore.cli import main

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
            environ["PYTHONPATH"] = str(self.folder)
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


def page_env(emulator: Any, page: Path, folder: Path) -> dict[str, str]:
    return {
        "FIRESTORE_EMULATOR_HOST": emulator.address,
        "GOOGLE_CLOUD_PROJECT": project_of(page),
        "TSSTORE_HOME": str(folder / ".tsstore-home"),  # never the developer's own local store
        "MPLBACKEND": "Agg",
    }


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_every_block_of_the_page_runs(page: Path, tsstore_emulator: Any, tmp_path: Path, monkeypatch: Any) -> None:
    for name in ("TSSTORE_PROJECT", "TSSTORE_SPEC", "TSSTORE_DATABASE"):
        monkeypatch.delenv(name, raising=False)
    reader = Reader(tmp_path, page_env(tsstore_emulator, page, tmp_path))
    modules = set(sys.modules)
    try:
        for block in blocks(page):
            if block.marker == "not run":
                assert block.argument, f"{block.where}: say why the block is not run"
            elif block.marker == "file":
                target = reader.folder / block.argument
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.code)
            elif block.marker == "output":
                assert matches(block.code, reader.printed), (
                    f"{block.where}: printed\n{reader.printed}\nnot\n{block.code}"
                )
            elif block.language == "python":
                reader.python(block)
            elif block.language == "console":
                reader.console(block)
            else:
                raise AssertionError(f"{block.where}: a ```{block.language} block that neither runs nor is checked")
    finally:  # a module the page wrote is the page's own
        for name in set(sys.modules) - modules:
            if str(getattr(sys.modules[name], "__file__", None) or "").startswith(str(tmp_path)):
                del sys.modules[name]


def test_few_blocks_are_not_run_and_each_says_why() -> None:
    every = [block for page in PAGES for block in blocks(page)]
    skipped = [block for block in every if block.marker == "not run"]
    assert every and len(skipped) <= NOT_RUN_AT_MOST, [b.where for b in skipped]
    assert all(block.argument for block in skipped)
    assert len({project_of(page) for page in PAGES}) == len(PAGES)  # no two pages share data


def test_the_harness_compares_output_and_reads_commands() -> None:
    assert matches("wrote 3 ticks\n['BBB', 'AAA']\n", "wrote 3 ticks  \n['BBB', 'AAA']")
    assert matches("count: ...\ndone", "count: 12\n13\ndone")
    assert not matches("wrote 3 ticks", "wrote 4 ticks")
    assert not matches("a\nb", "a\nb\nc")
    assert commands("$ tsstore count \\\n    --where symbol=AAA\n3\n$ export A=B\n") == [
        ("tsstore count  --where symbol=AAA", "3"),
        ("export A=B", ""),
    ]


def test_the_examples_in_docstrings_run() -> None:
    """The API reference is made of docstrings: their ``>>>`` examples run too."""
    import doctest
    import importlib

    package = DOCS.parent / "tsstore"
    with_examples = [p for p in package.rglob("*.py") if ">>>" in p.read_text()]
    assert with_examples
    for path in with_examples:
        name = ".".join(path.relative_to(DOCS.parent).with_suffix("").parts)
        result = doctest.testmod(importlib.import_module(name))
        assert result.attempted and not result.failed, name


class _Text(html.parser.HTMLParser):
    """The text of an HTML page, as a browser's copy of it gives it."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def built_cli_examples() -> list[str]:
    """Every example command of the built CLI reference (``docs/_build/reference/cli.html``,
    which the README's test command builds first; built here when it is missing), as the
    page's text holds it: continuation lines joined, usage lines left out."""
    page = DOCS / "_build" / "reference" / "cli.html"
    if not page.exists():
        subprocess.run([sys.executable, "-m", "sphinx", "-q", "-b", "html", str(DOCS), str(DOCS / "_build")],
                       check=True, capture_output=True)  # fmt: skip
    reader = _Text()
    reader.feed(page.read_text(encoding="utf-8"))
    lines = "".join(reader.parts).replace("\\\n", " ").splitlines()
    return [line.strip() for line in lines
            if line.strip().startswith("tsstore ") and "[OPTIONS]" not in line and "version" not in line
            and not re.fullmatch(r"tsstore [\d.]+", line.strip())]  # fmt: skip


def test_every_example_of_the_built_cli_reference_pastes_into_a_shell() -> None:
    """Copied from the page, each example splits as a shell would (straight quotes, no en
    dash for ``--``), names a command that exists and only options that command takes
    (``backfill`` and ``export`` pass unknown ones on to Beam)."""
    examples = built_cli_examples()
    assert len(examples) >= 50, examples  # 54 when written
    for example in examples:
        assert not set(example) & set("\u2013\u2014\u2018\u2019\u201c\u201d"), example
        segment: list[str] = []
        for word in [*shlex.split(example, comments=True), "&&"]:  # commands chained with && are checked each
            if word not in ("&&", "||", ";", "|"):
                segment.append(word)
                continue
            if segment and segment[0] == "tsstore":
                check_command_line(example, segment[1:])
            segment = []


def check_command_line(example: str, words: list[str]) -> None:
    """``tsstore WORDS`` names a command, and only options it takes."""
    command: click.Command = main
    while isinstance(command, click.Group):
        found = command.get_command(click.Context(command), words.pop(0))
        assert found is not None, example
        command = found
    if command.context_settings.get("ignore_unknown_options"):
        return
    known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    given = [word.split("=", 1)[0] for word in words if word.startswith("--")]
    assert set(given) <= known, (example, sorted(set(given) - known))


def test_the_file_an_example_block_is_shows_its_name_on_the_built_page() -> None:
    """A block marked ``<!-- file: NAME -->`` (which the harness writes to NAME) is shown on
    the built page under the caption ``NAME:``, not only in an HTML comment."""
    built_cli_examples()  # builds the site when it is missing
    marked = 0
    for page in DOCS.rglob("*.md"):
        if "_build" in page.parts:
            continue
        names = re.findall(r"^<!-- file: (\S+) -->$", page.read_text(encoding="utf-8"), flags=re.M)
        if not names:
            continue
        reader = _Text()
        reader.feed((DOCS / "_build" / page.relative_to(DOCS).with_suffix(".html")).read_text(encoding="utf-8"))
        shown = "".join(reader.parts)
        for name in names:
            assert f"\n{name}:\n" in shown, (page, name)
            marked += 1
    assert marked >= 25, marked


#: Types a public signature names that are the request model's own, not a reader's:
#: ``QueryOptions`` is expanded into one keyword per option. (A stream verb's request returns a
#: ``Reading`` and a live verb's a ``Listening``; each store's signature shows what it returns.)
REQUEST_TYPES = {"tsstore.read.query.QueryOptions"}


def public_types() -> dict[str, set[str]]:
    """Every tsstore class a public signature names (parameters and results of ``__all__``'s
    functions, classes and their methods, and both stores' verbs), by where it is named."""
    import inspect
    import typing

    import tsstore

    found: dict[str, set[str]] = {}

    def walk(hint: Any, where: str) -> None:
        if isinstance(hint, type) and hint.__module__.startswith("tsstore"):
            found.setdefault(f"{hint.__module__}.{hint.__qualname__}", set()).add(where)
        for part in (typing.get_origin(hint), *typing.get_args(hint)):
            if part is not None:
                walk(part, where)

    def hints(obj: Any, where: str) -> None:
        signature = getattr(obj, "__signature__", None)
        if signature is not None:  # a verb: its public signature, annotations resolved
            for param in signature.parameters.values():
                walk(param.annotation, where)
            walk(signature.return_annotation, where)
            return
        for hint in typing.get_type_hints(obj).values():
            walk(hint, where)

    for name in tsstore.__all__:
        obj = getattr(tsstore, name)
        if inspect.isclass(obj):
            hints(obj.__init__, name)
            for member in vars(obj):
                attribute = getattr(obj, member)
                if not member.startswith("_") and inspect.isfunction(attribute):
                    hints(attribute, f"{name}.{member}")
        elif inspect.isroutine(obj):  # (a type alias such as ``DuplicatePolicy`` names no parameters)
            hints(obj, name)
    for store in (tsstore.TimeSeriesStore, tsstore.AsyncTimeSeriesStore):
        for member in dir(store):
            if not member.startswith("_") and callable(getattr(store, member)):
                hints(getattr(store, member), f"{store.__name__}.{member}")
    return found


def test_every_exported_name_and_every_type_of_a_public_signature_has_a_reference_entry() -> None:
    """The API reference (docs/reference/api/*.md) has an entry for each name of
    ``tsstore.__all__`` and for each tsstore type a public signature names, under the name users
    import it by or its defining module's."""
    from sphinx.util.inventory import InventoryFile

    import tsstore

    built_cli_examples()  # builds the site when it is missing
    inventory = InventoryFile.loads((DOCS / "_build" / "objects.inv").read_bytes(), uri="")
    entries = {name for kind in inventory.data if kind.startswith("py:") for name in inventory.data[kind]}
    missing = [name for name in tsstore.__all__ if name != "__version__" and f"tsstore.{name}" not in entries]
    assert not missing, missing
    types = public_types()
    named = {"tsstore.read.cost.ReadStats", "tsstore.live.state.TailTick", "tsstore.live.state.WindowUpdate"}
    assert named <= set(types)  # the three the issue found without an entry
    exported = {f"{getattr(tsstore, n).__module__}.{n}": f"tsstore.{n}" for n in tsstore.__all__ if n != "__version__"}
    lacking = {name: sorted(where)[:3] for name, where in types.items()
               if name not in REQUEST_TYPES and name not in entries and exported.get(name) not in entries}  # fmt: skip
    assert not lacking, lacking


def reference_entries() -> Iterator[tuple[str, Any, str]]:
    """``(name, object, kind)`` for each export of ``tsstore``, its public methods and both stores' verbs."""
    import enum
    import inspect

    import tsstore

    for name in tsstore.__all__:
        obj = getattr(tsstore, name)
        if inspect.isclass(obj):
            if not issubclass(obj, enum.Enum):  # an enum is named, not called with parameters
                yield name, obj, "class"
            for member in dir(obj):
                attribute = getattr(obj, member)
                if (not member.startswith("_") and callable(attribute) and not inspect.isclass(attribute)
                        and (getattr(attribute, "__module__", "") or "").startswith("tsstore")):  # fmt: skip
                    yield f"{name}.{member}", attribute, "method"
        elif inspect.isroutine(obj):
            yield name, obj, "function"


def test_every_parameter_has_a_description() -> None:
    """Each parameter of the reference's entries has its own description (after napoleon and
    docs/conf.py's ``describe_parameters``, which builds the page)."""
    import importlib.util
    import inspect

    from sphinx.ext.napoleon import Config
    from sphinx.ext.napoleon.docstring import GoogleDocstring

    loaded = importlib.util.spec_from_file_location("docs_conf", DOCS / "conf.py")
    assert loaded is not None and loaded.loader is not None
    conf = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(conf)
    config = Config(napoleon_use_param=True, napoleon_use_rtype=True)
    undescribed = set()
    for name, obj, kind in reference_entries():
        lines = GoogleDocstring(inspect.getdoc(obj) or "", config, what=kind).lines()
        conf.describe_parameters(None, kind, name, obj, None, lines)
        undescribed |= {f"{name}.{param}" for param in conf.undescribed(obj, lines)}
    assert not undescribed, sorted(undescribed)
