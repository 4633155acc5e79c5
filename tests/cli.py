"""Running the ``tsstore`` command in the test process, as a user's shell would run it.

A command run here sees the environment given (variables set to ``None`` are unset), runs
in ``cwd``, reads ``stdin``, and answers like a finished process: ``returncode``, ``stdout``
and ``stderr`` apart. A Python exception that escapes the command fails the test with its
traceback (a process would print it and exit 1), so "no traceback" is checked by the test
failing. Commands that must be killed or interrupted still run as processes, and so does a
``tsstore emulator start`` that starts the local store: it leaves a background process
running, as it should, which a test process would report as a leaked child. Once the store
runs, ``emulator start`` starts nothing (it finds the store, or loads rules into it), and
runs here like the other commands.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from click.testing import CliRunner

from tsstore.cli import main
from tsstore.local import supervisor


@dataclass(frozen=True)
class Ran:
    """What a finished command left: its exit code and its two streams."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def tsstore(*args: str, env: Mapping[str, str | None] | None = None, cwd: Path | None = None,
            stdin: str | None = None) -> Ran:  # fmt: skip
    """``tsstore ARGS`` run in this process (``emulator start`` with no store running: in a
    process of its own)."""
    environ = {k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None}
    home = Path(environ["TSSTORE_HOME"]) if "TSSTORE_HOME" in environ else None
    mode = "datastore" if "datastore" in (*args[2:], environ.get("TSSTORE_MODE")) else "native"
    folder = home / "datastore" if home is not None and mode == "datastore" else home
    if args[:2] == ("emulator", "start") and supervisor.status(folder, mode=mode) is None:
        done = subprocess.run([sys.executable, "-m", "tsstore", *args], env=environ, cwd=cwd, input=stdin,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        return Ran(tuple(args), done.returncode, done.stdout, done.stderr)
    runner = CliRunner()
    where, path, modules = Path(cwd or os.getcwd()).resolve(), list(sys.path), set(sys.modules)
    try:
        with contextlib.chdir(where):
            result = runner.invoke(main, list(args), env=dict(env or {}), input=stdin, catch_exceptions=False,
                                   prog_name="tsstore")  # fmt: skip
    finally:  # a declaration imported from cwd (module:NAME) is the command's, as in its own process
        sys.path[:] = path
        forget_modules(where, since=modules)
    return Ran(tuple(args), result.exit_code, result.stdout, result.stderr)


def one_error(ran: Ran) -> str:
    """The command's error: its last stderr line, which must be one ``Error:`` line (and no
    traceback above it)."""
    assert "Traceback" not in ran.stderr, ran.stderr
    lines = [line for line in ran.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("Error: "), ran.stderr
    return lines[-1]


def forget_modules(folder: Path, *, since: set[str]) -> None:
    """Drop the modules imported from ``folder`` that were not imported before (``since``), so
    a later test's own ``myapp.schema`` is imported from its own folder. A package without an
    ``__init__.py`` has no ``__file__``, only a ``__path__``: left behind, it made a later
    ``myapp.schema`` resolve in an earlier test's folder. tsstore's own modules stay."""
    for name in set(sys.modules) - since:
        module = sys.modules[name]
        places = [str(getattr(module, "__file__", None) or ""), *map(str, getattr(module, "__path__", None) or ())]
        if name.partition(".")[0] != "tsstore" and any(p.startswith(str(folder)) for p in places if p):
            del sys.modules[name]


def subcommands(group: click.Group) -> dict[str, click.Command]:
    """A group's commands by name, as ``--help`` lists them (``tsstore``'s are looked up, not
    held in ``group.commands``)."""
    context = click.Context(group)
    found = {name: group.get_command(context, name) for name in group.list_commands(context)}
    return {name: command for name, command in found.items() if command is not None}


def run_cli(*args: str, emulator: Any, cwd: Path, stdin: str | None = None) -> Ran:
    env = {} if emulator is None else {"FIRESTORE_EMULATOR_HOST": emulator.address}
    return tsstore(*args, env=env, cwd=cwd, stdin=stdin)
