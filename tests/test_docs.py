"""The documentation site: every code block of every page runs on the real emulator as a
reader would run it (the harness is ``tests/docs_reader.py``), and the reference describes
every exported name, every type a public signature names and every parameter."""

from __future__ import annotations

import html.parser
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest

from tests.cli import forget_modules, tsstore
from tests.docs_reader import (
    DOCS,
    NOT_RUN_AT_MOST,
    PAGES,
    Reader,
    blocks,
    commands,
    matches,
    page_env,
    project_of,
)
from tests.otlp import OtlpReceiver
from tsstore.cli import main


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_every_block_of_the_page_runs(
    page: Path, tsstore_emulator: Any, tmp_path: Path, monkeypatch: Any, request: pytest.FixtureRequest
) -> None:
    for name in ("TSSTORE_PROJECT", "TSSTORE_SPEC", "TSSTORE_DATABASE", "DATASTORE_EMULATOR_HOST"):
        monkeypatch.delenv(name, raising=False)
    datastore = request.getfixturevalue("datastore_emulator") if "datastore" in page.name else None
    reader = Reader(tmp_path, page_env(tsstore_emulator, page, tmp_path, datastore))
    collector = OtlpReceiver() if page.name == "traces.md" else None  # where the page's spans go
    if collector is not None:
        reader.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.base
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
        forget_modules(tmp_path, since=modules)
        if collector is not None:
            collector.close()
    if collector is not None:  # the page's example exported its trace, under the service it named
        assert {span.resource.get("service.name") for span in collector.spans} == {reader.env["OTEL_SERVICE_NAME"]}
        assert {span.name for span in collector.spans} >= {"read the demo day", "tsstore.round", "tsstore.count"}


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


def built_cli_example_blocks() -> list[str]:
    """The text of each command's ``Example:`` block on the built CLI reference, as its copy
    button copies it (the whole block: it has no ``$`` prompts)."""
    built_cli_examples()  # builds the site when it is missing
    page = (DOCS / "_build" / "reference" / "cli.html").read_text(encoding="utf-8")
    found = re.findall(r"<p>Examples?:</p>\s*<div class=\"highlight-shell[^>]*><div class=\"highlight\"><pre>(.*?)</pre>",
                       page, flags=re.S)  # fmt: skip
    return [html.unescape(re.sub(r"<[^>]+>", "", block)) for block in found]


#: Examples of the CLI reference the suite does not run, each with why (by what the command
#: line holds).
NOT_RUN_EXAMPLES = {
    "--project ": "reaches a Google Cloud project",
    "firebase ": "deploys with firebase-tools to a Google Cloud project",
    "gcloud ": "deploys with gcloud to a Google Cloud project",
    "tsstore console": "serves the console until Ctrl-C (tests/test_console.py runs it)",
    "tsstore tail": "prints new ticks until Ctrl-C (tests/test_live.py runs it)",
    "tsstore watch": "redraws until Ctrl-C (tests/test_live.py runs it)",
    "tsstore emulator": "starts or stops a local store of its own, a second emulator (tests/test_cli.py runs them)",
    "tsstore demo": "writes 20 000 ticks or more (tests/test_cli.py runs the demo with fewer)",
}

#: The files the examples name, in a folder of their own: the declarations (myapp/schema.py's
#: TICKS is the demo's series in a collection of its own), and the files ingest and backfill read.
EXAMPLE_FILES = {
    "myapp/__init__.py": "",
    "myapp/schema.py": "import dataclasses\n\nfrom tsstore.demo import SPEC\n\n"
                       'TICKS = dataclasses.replace(SPEC, collection="trades")\n',  # no roll-up: old ticks are not late
    "myapp/cold.py": "import dataclasses\n\nfrom tsstore import ColdTier\nfrom tsstore.demo import SPEC\n\n"
                     'TICKS = dataclasses.replace(SPEC, cold=ColdTier("lake"))\n',  # the demo's ticks, sealed
    "series.toml": '[[series]]\ncollection = "ticks"\nkey_fields = ["symbol"]\nshapes = ["symbol"]\n'
                   'measures = ["price.micros"]\n',
    "spec.toml": '[[series]]\ncollection = "moving"\nkey_fields = ["symbol"]\nshards = ["a", "b"]\n'
                 'retired = ["old"]\n',
}


def test_every_example_of_the_built_cli_reference_runs_in_a_shell(tsstore_emulator: Any, tmp_path: Path) -> None:
    """Each example of the built CLI reference (``docs/_build/reference/cli.html``), copied
    from the page as a reader copies it, is read by a shell and exits 0 on the emulator: a
    continued command (``\\`` at a line's end) is one command, quotes and globs are the
    shell's, and every example runs on the default declaration (the demo's) or the files it
    names. The shell's ``tsstore`` hands its words to this process, where they run as
    tests/cli.py runs a command (a process per example took minutes). The demo's ticks and
    their roll-up are there first."""
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    from tsstore import SeriesSpec, TimeSeriesStore, WriteOptions
    from tsstore.demo import SPEC, demo_rows
    from tsstore.local.synthetic import CSV_COLUMNS, flat_row, trading_day

    for name, text in EXAMPLE_FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    rows = [flat_row(t) for t in trading_day(60, day=dt.date(2019, 1, 3))]
    (tmp_path / "ticks.csv").write_text(
        ",".join(CSV_COLUMNS) + "\n" + "".join(",".join(str(r[c]) for c in CSV_COLUMNS) + "\n" for r in rows)
    )
    (tmp_path / "ticks").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "ticks.parquet")
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "ticks" / "day.parquet")
    (tmp_path / "trades.csv").write_text("symbol,ts,price.micros\nAAA,1546419600000,5\nBBB,1546419601000,6\n")
    project = f"cli-examples-{tmp_path.name[-12:].lower().replace('_', '-')}"
    client = tsstore_emulator.client(project=project)
    TimeSeriesStore(client, SPEC, write_options=WriteOptions(ramp=False)).write([*demo_rows(300), *trading_day(300)])
    recent = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)  # after the shards example's --since
    moving = SeriesSpec("moving", key_fields=["symbol"], shards=["old"])
    TimeSeriesStore(client, moving, write_options=WriteOptions(ramp=False)).write(
        [{"symbol": f"S{i}", "timestamp": recent + dt.timedelta(seconds=i)} for i in range(20)]
    )
    client.close()
    env: dict[str, str | None] = {
        "FIRESTORE_EMULATOR_HOST": tsstore_emulator.address, "GOOGLE_CLOUD_PROJECT": project,
        "TSSTORE_HOME": str(tmp_path / ".tsstore-home"), "MPLBACKEND": "Agg", "TSSTORE_SPEC": None,
        "TSSTORE_PROJECT": None, "TSSTORE_DATABASE": None, "TSSTORE_MODE": None,
        # The Beam examples run in this process: the DirectRunner's worker processes each import
        # Beam and tsstore (20 of the test's 45 s); tests/test_beam.py runs the commands with them.
        "TSSTORE_RUNNER": "BundleBasedDirectRunner",
    }  # fmt: skip
    words = tmp_path / "words"

    def shell(command: str) -> list[tuple[int, list[str]]]:
        """``command`` read by bash, each ``tsstore`` it calls run here: (exit code, stderr) each."""
        words.write_bytes(b"")
        into = shlex.quote(str(words))
        define = f'tsstore() {{ printf "%s\\0" "$@" >> {into}; printf "\\1" >> {into}; }}'
        read = subprocess.run(["bash", "-c", f"{define}\n{command}"], cwd=tmp_path, capture_output=True, text=True,
                              timeout=60)  # fmt: skip
        assert read.returncode == 0, (command, read.stderr)
        calls = [call.split(b"\0")[:-1] for call in words.read_bytes().split(b"\1")[:-1]]
        assert calls, command
        answers = []
        for call in calls:
            ran = tsstore(*(word.decode() for word in call), env=env, cwd=tmp_path)
            answers.append((ran.returncode, ran.stderr.strip().splitlines()[-1:]))
        return answers

    assert [code for code, _ in shell("tsstore rollup")] == [0]  # the roll-up the --combine examples read
    blocks = built_cli_example_blocks()
    assert len(blocks) >= 25, blocks  # one per command, and the group's
    # a line ending in \ goes on: one command; the purges last, which delete the ticks the others read
    examples = [command for block in blocks for command in re.split(r"(?<!\\)\n", block.strip())
                if not any(part in command for part in NOT_RUN_EXAMPLES)]  # fmt: skip
    ran, failed = 0, []
    for command in sorted(examples, key=lambda command: "tsstore purge" in command):
        answers = shell(command)
        ran += len(answers)
        failed += [(command, code, said) for code, said in answers if code != 0]
    rejected = [f"{p.name}: {p.read_text()[:300]}" for p in tmp_path.glob("*.rejects.csv")]
    assert not failed, "\n".join(map(str, [*failed, *rejected]))
    assert ran >= 40, ran
