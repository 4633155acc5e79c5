"""How a ``tsstore`` command ends: one set of exit codes, one line per failure, and Ctrl-C.

* 0: done, as asked (a command that could not do what was asked never ends with 0).
  1: a runtime failure: the command was right, but Firestore, the network, the files or what
  is stored do not allow it now (Firestore refused, a fault outlasted its budget, a file
  could not be written, no credentials, a package missing, a counter not created yet, a
  roll-up, or its source, that has not run: :class:`~tsstore.errors.StateError`).
  2: a usage error: the command, a value, the declaration or an input file is wrong, and
  fixing the command fixes it (:class:`~tsstore.errors.UsageError`: a bad option value, a
  query the declaration cannot serve, a bad declaration, a file to ingest that is empty or
  has no time column). 4: finished, with rows rejected (``ingest``, ``backfill``).
  130: interrupted by Ctrl-C.
* A failure prints ``Error: <what, and what to do>`` on stderr: never a traceback. Errors the
  library raises carry their own words; errors of the layers below (google-auth, the
  Firestore client, the file system) are worded here, once, for every command.
* Ctrl-C ends a command with exit 130 and a line saying it was interrupted. Commands that
  change data settle what is in flight first and print their own summary
  (:func:`exit_interrupted`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shlex
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import click

from tsstore.cli.mode import mode_mismatch
from tsstore.errors import EmulatorError, TsstoreError, TsstoreWarning, UsageError

OK, FAILED, USAGE, INTERRUPTED = 0, 1, 2, 130
#: ``ingest`` or ``backfill`` finished, and some rows were rejected (the summary says how many, the reject
#: file which): a script can tell a clean load from a partial one.
REJECTED = 4


class Failure(click.ClickException):
    """``Error: <message>`` on stderr and exit 1."""

    exit_code = FAILED


class UsageFailure(Failure):
    """``Error: <message>`` on stderr and exit 2: the command was asked for something it
    cannot do as asked."""

    exit_code = USAGE


def usage(message: str) -> UsageFailure:
    """A usage error worded by tsstore: one ``Error:`` line, exit 2."""
    return UsageFailure(message)


def failure_of(exc: BaseException) -> Failure | None:
    """The one-line failure ``exc`` ends a command with, or ``None`` if it is not one the
    commands expect (a bug: it keeps its traceback)."""
    if isinstance(exc, EmulatorError) and (served := refused_as_other_mode(exc.__cause__)) is not None:
        return Failure(mode_mismatch(served))  # the library's words, with the command's --mode
    if isinstance(exc, TsstoreError):
        return UsageFailure(str(exc)) if isinstance(exc, UsageError) else Failure(str(exc))
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as auth

    if isinstance(exc, auth.DefaultCredentialsError):
        return Failure(
            "no Google credentials found: run `gcloud auth application-default login` (or set "
            "GOOGLE_APPLICATION_CREDENTIALS to a service account key file), or leave out --project "
            "to use the local emulator"
        )
    if isinstance(exc, auth.GoogleAuthError):
        return Failure(f"Google credentials were refused ({exc}); run `gcloud auth application-default login` again")
    if isinstance(exc, (gexc.PermissionDenied, gexc.Unauthenticated)):
        return Failure(f"Firestore refused access ({exc.message}); check the project and the account's roles")
    if isinstance(exc, gexc.NotFound):
        return Failure(f"Firestore found no such database or project ({exc.message}); check --project and --database")
    if (served := refused_as_other_mode(exc)) is not None:
        return Failure(mode_mismatch(served))
    if isinstance(exc, gexc.GoogleAPICallError):
        return Failure(f"Firestore refused the request: {exc}")
    if isinstance(exc, OSError) and exc.filename is not None:
        return Failure(f"cannot use {exc.filename}: {exc.strerror or exc}")
    return None


def refused_as_other_mode(exc: BaseException | None) -> str | None:
    """The mode an emulator runs, when ``exc`` is its refusal of a client of the other mode."""
    from google.api_core import exceptions as gexc

    from tsstore.faults import refusing_mode

    return refusing_mode(str(exc.message)) if isinstance(exc, gexc.InvalidArgument) else None


#: Set by Ctrl-C while a command runs. Python raises ``KeyboardInterrupt`` wherever the main
#: thread is, and drops it (``Exception ignored in ...``) when that is code nothing can raise
#: from: a weakref callback of the import system, an object's ``__del__``. Seen when Ctrl-C
#: came while ``tsstore tail`` was still importing: the tail then ran on. So the command's
#: waits also look at this flag (:func:`check_interrupted`).
_CTRL_C = threading.Event()


def check_interrupted() -> None:
    """Raise ``KeyboardInterrupt`` if Ctrl-C was pressed while the command ran, whether or not
    Python delivered it where it landed. Long waits call this between their turns."""
    if _CTRL_C.is_set():
        raise KeyboardInterrupt


#: Set while a block must not be cut in two by Ctrl-C (:func:`ctrl_c_deferred`).
_DEFERRED = threading.Event()


@contextlib.contextmanager
def ctrl_c_deferred() -> Iterator[None]:
    """Ctrl-C held back while the block runs, and raised when it ends (not when the block
    raises): for a step that must not be cut in two, such as counting a row and printing it.
    Held back in the handler itself: blocking the signal would not do, as the system then
    hands it to another thread, whose trip Python still runs in the main thread at once."""
    _DEFERRED.set()
    try:
        yield
    finally:
        _DEFERRED.clear()
    check_interrupted()


def _on_ctrl_c(signum: int, frame: object) -> None:
    _CTRL_C.set()
    if not _DEFERRED.is_set():
        raise KeyboardInterrupt


@contextlib.contextmanager
def _ctrl_c_noted() -> Iterator[None]:
    """Ctrl-C noted in :data:`_CTRL_C` as well as raised, while the block runs (where Python
    would raise it: in the main thread, with its default handler in place)."""
    _CTRL_C.clear()
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    signal.signal(signal.SIGINT, _on_ctrl_c)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


class Group(click.Group):
    """The ``tsstore`` group: every command under it ends as this module says."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        with _ctrl_c_noted():
            return super().main(*args, **kwargs)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        resolved = super().resolve_command(ctx, args)
        ctx.invoked_subcommand = resolved[0]  # as click sets it next: an interruption now names the command
        check_interrupted()  # Ctrl-C while the command's modules were imported
        return resolved

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (KeyboardInterrupt, click.Abort) as stop:
            if isinstance(stop, click.Abort) and not isinstance(stop.__cause__, KeyboardInterrupt):
                raise  # a question answered "no": click says "Aborted!"
            command = ctx.invoked_subcommand or "command"
            exit_interrupted(f"tsstore {command} stopped before it finished", show_command=False)
        except click.ClickException:
            raise
        except Exception as exc:
            failure = failure_of(exc)
            if failure is None:
                raise
            invoked = self.get_command(ctx, ctx.invoked_subcommand or "")
            if invoked is not None and isinstance(exc, TsstoreError):
                failure = type(failure)(speak_cli(failure.message, invoked))
            raise failure from exc


#: Option names that are also the nouns library messages use (``collection 't'``).
_NOUNS = frozenset({"collection"})


def speak_cli(message: str, command: click.Command) -> str:
    """A library message in the command's words: a keyword the command has as an option
    (``tolerance '5' ...``, ``headroom -1.0 ...``, ``give volume=``, ``rollups=[...]``, ``combine=True``) named as
    that option (``--tolerance '5'``, ``give --volume``, ``--rollup``, ``--combine``). Code
    shown in parentheses (``bars(price=...)``) is left as it is, and so is a name followed by
    a word (``until it has run``): only one followed by a value is the option."""
    options: dict[str, str] = {}
    for param in command.params:
        for opt in param.opts:
            if opt.startswith("--"):
                name = opt[2:].replace("-", "_")
                options.setdefault(name, opt)
                if getattr(param, "multiple", False):
                    options.setdefault(f"{name}s", opt)  # rollups=[...] is --rollup, repeated
    for name, opt in sorted(options.items(), key=lambda item: -len(item[0])):
        keyword = rf"(?<![\w.\-'\"(]){re.escape(name)}"
        message = re.sub(keyword + r"=True\b", opt, message)
        message = re.sub(keyword + r"=\[[^\]]*\]", opt, message)
        message = re.sub(keyword + r"=(?=[,;)\s]|$)", opt, message)
        message = re.sub(keyword + r"=(?!=)", f"{opt} ", message)
        if name not in _NOUNS:  # tolerance '5', until 2019-...: the option and its value
            message = re.sub(keyword + r" (?=['\d]|-\d)", f"{opt} ", message)
    return message


def exit_interrupted(advice: str, *, show_command: bool = True) -> NoReturn:
    """After Ctrl-C: say on stderr what to do (``advice``), with the command that does it
    unless ``show_command`` is false, and exit 130 (the shell's code for Ctrl-C).

    Threads still waiting on a request Firestore has not answered (a writer's batch, a
    query's chunk) would hold the interpreter's exit, and a second Ctrl-C would print their
    traceback; what they carry is unconfirmed and already reported, so leave without them."""
    again = f":\n  {shlex.join(['tsstore', *sys.argv[1:]])}" if show_command else ""
    click.echo(f"interrupted: {advice}{again}", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    if any(t is not threading.main_thread() and t.is_alive() and not t.daemon for t in threading.enumerate()):
        os._exit(INTERRUPTED)
    raise SystemExit(INTERRUPTED)


def end_now(message: str) -> NoReturn:
    """``Error: <message>`` on stderr and exit 1 at once, from any thread, whatever the main
    thread is waiting for (a request retried against a store that is gone): no cleanup runs,
    so only for what is as safe to end there as a kill is. On a line of its own below a
    progress bar that is still open (and not drawn again after it)."""
    from tqdm import tqdm

    bars = bool(getattr(tqdm, "_instances", None))
    click.echo(("\n" if bars else "") + f"Error: {message}", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(FAILED)


def library_warnings(command: Callable[..., Any]) -> Callable[..., Any]:
    """Print the library's warnings as ``warning: <message>`` lines on stderr, each message
    once (others as Python shows them). Goes right below ``@click.command``."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", TsstoreWarning)
            try:
                return command(*args, **kwargs)
            finally:
                said: set[str] = set()  # a command asking twice (a dry run, then the run) warns once
                for w in caught:
                    if issubclass(w.category, TsstoreWarning):
                        if str(w.message) not in said:
                            click.echo(f"warning: {w.message}", err=True)
                        said.add(str(w.message))
                    else:
                        warnings.showwarning(w.message, w.category, w.filename, w.lineno)

    return run
