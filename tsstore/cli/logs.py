"""Where a command's log records go: ``--log-level`` (or ``TSSTORE_LOG_LEVEL``) on standard
error, one line per record with the logger's name and the record's structured fields.

The library only creates records (:mod:`tsstore.logs`); the command is the application that
decides where they go. They go to standard error, never to standard output, whose rows and
JSON scripts read. Imported by the ``tsstore`` group itself, so it imports neither the
client nor pandas.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from typing import Any

import click

from tsstore.logs import fields_of

#: The levels ``--log-level`` takes, any case.
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: Stands for ``--log-level`` (the option wins).
LEVEL_ENV = "TSSTORE_LOG_LEVEL"
#: The level a command shows records from when neither the option nor the variable says.
DEFAULT_LEVEL = "WARNING"


class FieldsFormatter(logging.Formatter):
    """``LEVEL logger: message | key=value ...``: the record's structured fields after its
    message, a value with a space or a quote in it quoted as JSON, all on one line (an
    exception is named after the message; its traceback only at DEBUG)."""

    def __init__(self) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        line = self.formatMessage(record)
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            line += f" ({type(exc).__name__}: {exc})"
        line = " ".join(line.splitlines())  # one line, whatever the message holds
        fields = fields_of(record)
        if fields:
            line += " | " + " ".join(f"{name}={_value(value)}" for name, value in fields.items())
        if record.exc_info and logging.getLogger("tsstore").getEffectiveLevel() <= logging.DEBUG:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _value(value: Any) -> str:
    text = str(value)
    return json.dumps(text) if not text or any(c.isspace() or c in "\"'=|" for c in text) else text


class StderrLines(logging.Handler):
    """Each record as one line on the standard error the command has when it is emitted
    (a test runs many commands in one process, each with its own), below an open progress
    bar rather than through it."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            bars = sys.modules.get("tqdm")
            if bars is not None and getattr(bars.tqdm, "_instances", None):
                bars.tqdm.write(line, file=sys.stderr)
            else:
                click.echo(line, err=True)
        except Exception:  # noqa: BLE001  (logging's own rule: a record that cannot be shown is reported, not raised)
            self.handleError(record)


#: The one handler the commands add to the ``tsstore`` logger while they run.
_HANDLER = StderrLines()
_HANDLER.setFormatter(FieldsFormatter())


def show_records(level: str) -> Callable[[], None]:
    """Show the package's records from ``level`` on (a name of :data:`LEVELS`) on stderr; what
    undoes it (the logger as it was)."""
    logger = logging.getLogger("tsstore")
    before = logger.level
    if _HANDLER not in logger.handlers:
        logger.addHandler(_HANDLER)
    logger.setLevel(level.upper())
    _HANDLER.setLevel(level.upper())

    def undo() -> None:
        logger.removeHandler(_HANDLER)
        logger.setLevel(before)

    return undo


def _level_given(ctx: click.Context, param: click.Parameter, value: str) -> None:
    # For as long as the command runs: a process running several (a test's) keeps its own logging.
    ctx.call_on_close(show_records(value))


#: The ``tsstore`` group's ``--log-level``.
log_level_option = click.option(
    "--log-level",
    type=click.Choice(LEVELS, case_sensitive=False),
    default=DEFAULT_LEVEL,
    envvar=LEVEL_ENV,
    show_default=True,
    show_envvar=True,
    expose_value=False,
    is_eager=True,
    callback=_level_given,
    help="Show the library's log records from this level on, on standard error: one line each, with the "
    "logger's name and the record's fields (db.collection.name=... tsstore.faults.retried=...). DEBUG "
    "shows each request, INFO each verb's outcome, WARNING faults tried again and data refused.",
)
