"""The README's promises: its example runs as written, CI runs its test command, the demo
does what it says, and it stays short, leading into the documentation site."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.cli import subcommands, tsstore
from tests.docs_reader import DOCS, Block, Reader, matches, page_env
from tsstore.cli import main

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def block_after(marker: str) -> str:
    match = re.search(rf"<!-- {marker} -->\n```\w*\n(.*?)```", README, re.S)
    assert match, f"no code block after <!-- {marker} --> in README.md"
    return match.group(1)


def test_the_example_runs_as_written(tsstore_emulator: Any, tmp_path: Path) -> None:
    reader = Reader(tmp_path, page_env(tsstore_emulator, DOCS.parent / "README.md", tmp_path))
    reader.python(Block(DOCS.parent / "README.md", 0, "python", block_after("example"), "", ""))
    shown = re.search(r"<!-- example -->.*?<!-- output -->\n```text\n(.*?)```", README, re.S)
    assert shown and matches(shown.group(1), reader.printed), reader.printed


def test_the_readme_is_short_and_its_links_lead_somewhere() -> None:
    assert len(README.splitlines()) <= 150
    root = Path(__file__).resolve().parents[1]
    targets = re.findall(r"\]\(([^)#]+)\)", README)
    assert len(targets) > 20
    for target in targets:
        assert target.startswith("http") or (root / target).exists(), target


def test_ci_runs_the_readme_test_command() -> None:
    command = block_after("test-command").strip()
    assert command.split(" && ")[-1].startswith(".venv/bin/pytest") and "\n" not in command
    assert ".venv/bin/mypy --strict tsstore" in command  # the types are checked too
    assert ".venv/bin/sphinx-build -W " in command  # and the docs build without a warning
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    assert "test-command" in ci


def test_every_cli_command_has_an_example_in_its_help() -> None:
    """The CLI reference (docs/reference/cli.md) is generated from the commands' help, so
    every command and subcommand is documented; each help also shows an example."""
    import click

    for name, command in subcommands(main).items():
        assert command.help and "Example:" in command.help, f"`tsstore {name} --help` has no example"
        if isinstance(command, click.Group):
            for sub_name, sub in subcommands(command).items():
                assert sub.help and "Example:" in sub.help, f"`tsstore {name} {sub_name} --help` has no example"
    assert ":nested: full" in (DOCS / "reference" / "cli.md").read_text()


@pytest.mark.emulator  # it starts an emulator of its own
def test_demo_runs_on_the_embedded_emulator(tmp_path: Path) -> None:
    # In this process (tests/cli.py): the demo's emulator is its own, started and stopped by the
    # command. The display options it sets for its tables are put back afterwards.
    shown = ("display.width", "display.max_columns")
    with pd.option_context(*(x for name in shown for x in (name, pd.get_option(name)))):
        done = tsstore("demo", "--ticks", "2000", env={"FIRESTORE_EMULATOR_HOST": None, "GOOGLE_CLOUD_PROJECT": None},
                       cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "starting a temporary local emulator" in done.stderr
    assert "wrote 2,003 ticks (the seed's 3 instruments and 2,000 synthetic)" in done.stdout
    assert "scan of the collection" in done.stdout  # says why the emulator is slower than Firestore
    sections = done.stdout.split("\n--- ")
    assert [s.split(":")[0] for s in sections[1:4]] == [
        "queryCommonStock",
        "queryExchange1Instruments",
        "queryUSDInstruments",
    ]
    # the seed's documents are the newest, so they lead each seed query
    first_rows = [s.splitlines()[3].split()[2] for s in sections[1:4]]
    assert first_rows == ["BBB", "AAA", "AAA"]
    assert sections[4].startswith("one symbol: AAA's newest 5") and "(5 rows, 1 query," in sections[4]
    assert all(line.split()[2] == "AAA" for line in sections[4].splitlines()[3:8])
    assert sections[5].startswith("value filter: EXCHG1") and "(5 rows, 1 chunk query," in sections[5]
    assert all(int(line.split()[-1]) >= 4000 for line in sections[5].splitlines()[3:8])  # volume, the last column
    rows = re.search(r"\((\d+) rows", sections[6])
    assert sections[6].startswith("time range") and rows and 1 <= int(rows.group(1)) <= 10
    assert [s.split(" (")[0] for s in sections[7:10]] == [
        "latest tick per symbol",
        "the synthetic day per currency, no tick downloaded",
        "30-minute bars of AAA, CCC, EEE",
    ]
    per_currency = re.findall(r"^  ([A-Z]{3}): +([\d,]+) ticks, volume +[\d,]+, average price [\d,.]+ \1$",
                              sections[8], re.M)  # fmt: skip
    assert sum(int(n.replace(",", "")) for _, n in per_currency) == 2000  # the day's 2 000 synthetic ticks
    assert "shard" not in sections[1].splitlines()[1]  # tsstore's own field is not shown
    chart = tmp_path / "tsstore-demo-chart.png"
    assert "chart of 3 symbols' bars written to tsstore-demo-chart.png" in done.stdout
    assert chart.read_bytes().startswith(b"\x89PNG") and chart.stat().st_size > 20_000
