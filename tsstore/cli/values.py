"""What the commands share of reading their options: ``--limit``, ``--naive`` and the files a
command will write (checked before any work). Times, ``--where`` and ``--columns`` are read by
:mod:`tsstore.typed`, as the console reads its forms; each refuses a bad value with one line
naming it and what is allowed (exit 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tsstore.limits import MAX_QUERY_LIMIT

#: ``--limit``: Firestore's limit is a 32-bit integer.
LIMIT = click.IntRange(min=1, max=MAX_QUERY_LIMIT)

NAIVE_HELP = (
    "Read times written without a UTC offset in this zone: utc, or an IANA name such as "
    "America/New_York (without it they are refused). A bare date is midnight in it (UTC by default)."
)


def naive_option(command: Any) -> Any:
    """``--naive ZONE``, for a command that takes times."""
    return click.option("--naive", default=None, metavar="utc|ZONE", help=NAIVE_HELP)(command)


class OutputFile(click.ParamType):  # type: ignore[type-arg]
    """A file a command will write: its folder must exist, and it must not be a folder;
    ``suffixes`` (when given) are the kinds of file allowed. Checked before any work."""

    name = "file"

    def __init__(self, *, suffixes: tuple[str, ...] = ()) -> None:
        self.suffixes = suffixes

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        path = Path(value)
        if path.is_dir():
            self.fail(f"{value} is a folder; give a file name", param, ctx)
        folder = path.parent
        if not folder.is_dir():
            self.fail(f"cannot write {value}: the folder {folder} does not exist", param, ctx)
        if self.suffixes and path.suffix.lower() not in self.suffixes:
            self.fail(f"{value}: give a {', '.join(self.suffixes)} file", param, ctx)
        return path
