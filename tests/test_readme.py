"""The README's promises: its quickstart runs as written, the CLI does what it says, and
every CLI command is documented."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tsstore.cli import main

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def block_after(marker: str) -> str:
    match = re.search(rf"<!-- {marker} -->\n```\w*\n(.*?)```", README, re.S)
    assert match, f"no code block after <!-- {marker} --> in README.md"
    return match.group(1)


def test_quickstart_runs_as_written() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block_after("quickstart"), "README quickstart", "exec"), {"__name__": "readme"})
    text = out.getvalue()
    assert "wrote 3 ticks" in text
    assert "['BBB', 'AAA']" in text
    assert "Index1 ETF" in text and "473000000" in text


def test_identity_example_runs_as_written(client: Any, collection_name: str) -> None:
    import datetime as dt

    from tsstore import SeriesSpec, TimeSeriesStore, WriteError, WriteOptions

    store = TimeSeriesStore(
        client, SeriesSpec(collection_name, key_fields=["symbol"]), write_options=WriteOptions(ramp=False)
    )
    out = io.StringIO()
    names = {"store": store, "dt": dt, "UTC": dt.timezone.utc, "WriteError": WriteError}
    with contextlib.redirect_stdout(out):
        exec(compile(block_after("identity-example"), "README identity example", "exec"), names)
    lines = out.getvalue().splitlines()
    assert lines[0] == "2 2 1 2"
    assert lines[1].startswith("another tick with the same key and time is stored there with different content")


def test_quick_reconnects_example_runs_as_written(tsstore_emulator: Any, monkeypatch: Any) -> None:
    import datetime as dt

    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", tsstore_emulator.address)  # "my-project" on the emulator
    names: dict[str, Any] = {"__name__": "readme"}
    exec(compile(block_after("quick-reconnects"), "README quick reconnects", "exec"), names)
    store = names["store"]
    tick = {"symbol": "AAA", "timestamp": dt.datetime(2026, 11, 24, tzinfo=dt.timezone.utc)}
    assert store.write([tick]).created == 1 and store.count() >= 1


def test_ci_runs_the_readme_test_command() -> None:
    command = block_after("test-command").strip()
    assert command.split(" && ")[-1].startswith(".venv/bin/pytest") and "\n" not in command
    assert ".venv/bin/mypy --strict tsstore" in command  # the types are checked too
    assert ".venv/bin/sphinx-build -W " in command  # and the docs build without a warning
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    assert "test-command" in ci


def test_every_cli_command_is_documented() -> None:
    import click

    for name, command in main.commands.items():
        assert f"tsstore {name}" in README, f"`tsstore {name}` is not in README.md"
        assert command.help and "Example:" in command.help, f"`tsstore {name} --help` has no example"
        if isinstance(command, click.Group):
            listed = re.search(rf"tsstore {name} ([a-z|]+)", README)
            assert listed, f"README does not list the subcommands of `tsstore {name}`"
            assert set(listed.group(1).split("|")) == set(command.commands), listed.group(1)
            for sub_name, sub in command.commands.items():
                assert sub.help and "Example:" in sub.help, f"`tsstore {name} {sub_name} --help` has no example"


def test_demo_runs_on_the_embedded_emulator(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("FIRESTORE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT")}
    done = subprocess.run(
        [sys.executable, "-m", "tsstore", "demo", "--ticks", "2000"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
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
    rows = re.search(r"\((\d+) rows", sections[4])
    assert sections[4].startswith("time range") and rows and 1 <= int(rows.group(1)) <= 10
    assert [s.split(" (")[0] for s in sections[5:8]] == [
        "latest tick per symbol",
        "the synthetic day per currency, no tick downloaded",
        "30-minute bars of AAA, CCC, EEE",
    ]
    per_currency = re.findall(r"^  ([A-Z]{3}): +([\d,]+) ticks, volume +[\d,]+, average price [\d,.]+ \1$",
                              sections[6], re.M)  # fmt: skip
    assert sum(int(n.replace(",", "")) for _, n in per_currency) == 2000  # the day's 2 000 synthetic ticks
    assert "shard" not in sections[1].splitlines()[1]  # tsstore's own field is not shown
    chart = tmp_path / "tsstore-demo-chart.png"
    assert "chart of 3 symbols' bars written to tsstore-demo-chart.png" in done.stdout
    assert chart.read_bytes().startswith(b"\x89PNG") and chart.stat().st_size > 20_000


def fenced(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


def test_declaration_examples_in_the_readme_load(tmp_path: Path) -> None:
    from tsstore import SeriesSpec
    from tsstore.declaration import load_declaration, load_specs

    blocks = fenced("toml")
    series = next(b for b in blocks if "[[series]]" in b)
    rollup = next(b for b in blocks if "[[rollup]]" in b)
    path = tmp_path / "series.toml"
    path.write_text(series)
    [spec] = load_specs(str(path))
    assert spec.collection == "instruments" and len(spec.shards) == 3
    path.write_text(series + rollup)  # a roll-up table goes beside the series it rolls up
    [_], [bars] = load_declaration(str(path))
    assert bars.name == "instruments_1min" and bars.source == spec and bars.volume == "volume"
    schema = next(block for block in fenced("python") if "TICKS = SeriesSpec" in block)
    namespace: dict[str, object] = {}
    exec(compile(schema, "README schema example", "exec"), namespace)
    assert isinstance(namespace["TICKS"], SeriesSpec)


def test_layout_example_and_the_planner_output_match_the_code() -> None:
    namespace: dict[str, Any] = {}
    exec(compile(block_after("layout-example"), "README layout example", "exec"), namespace)
    shrunk, renamed = namespace["SHRUNK"], namespace["RENAMED"]
    assert shrunk.shards == ("s0", "s1", "s2") and len(shrunk.read_shards) == 10
    assert renamed.shards == ("x", "y", "z") and len(renamed.read_shards) == 13
    out = io.StringIO()
    args = ["capacity", "--writes-per-second", "1200", "--retention", "90 days", "--spec", "tsstore.demo:SPEC"]
    with contextlib.redirect_stdout(out):
        try:
            main.main(args, prog_name="tsstore", standalone_mode=False)
        except SystemExit as stop:
            assert stop.code in (0, None)
    assert out.getvalue() == block_after("plan-demo")


def test_live_example_runs_as_written() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block_after("live-example"), "README live example", "exec"), {"__name__": "readme"})
    assert out.getvalue().splitlines() == ["AAA False BBB True", "['AAA', 'BBB']"]
