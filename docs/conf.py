"""Sphinx configuration for tsstore's documentation site (``sphinx-build -W docs docs/_build``).

Sphinx, not MkDocs: tsstore's docstrings are written in reStructuredText (``:class:`` and
``:func:`` roles, double-backquoted code), which autodoc renders and cross-links as they
are; pages are Markdown through MyST, and the CLI reference comes from click itself
(sphinx-click), so neither can drift from the code.
"""

from __future__ import annotations

import inspect
import logging
import re
from pathlib import Path
from typing import Any

import tsstore
from tsstore.read.query import OPTION_HELP

# Apache Beam logs what it cannot import (BigQuery clients, apitools) when tsstore.beam is
# first imported: not the reader's concern, and not a warning about these docs. Imported here
# with logging off, autodoc later finds it imported.
logging.disable(logging.WARNING)
try:
    import tsstore.beam  # noqa: F401
except ImportError:  # built without the beam extra: its page says so
    pass
finally:
    logging.disable(logging.NOTSET)

project = "tsstore"
author = "The tsstore authors"
copyright = "2026, The tsstore authors"
release = version = tsstore.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "sphinx_click",
    "sphinx_copybutton",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "*.png"]
myst_heading_anchors = 3
# Code and options are shown as typed: no curly quotes, no en dash for "--" (a pasted
# `tsstore bars --interval 1h` must run in a shell).
smartquotes = False
# The copy button copies commands without their "$ " prompt and without the output after them.
copybutton_prompt_text = "$ "
copybutton_only_copy_prompt_lines = True

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "inherited-members": "BaseException", "show-inheritance": False}
nitpicky = False

html_theme = "furo"
html_title = f"tsstore {version}"


def _literal_help(app: object, ctx: object, lines: list[str]) -> None:
    """Help texts are plain text: a glob's ``*`` is not reStructuredText emphasis. A command's
    examples (its ``Example:`` block) are shown as a shell code block, as typed: reStructuredText
    would drop the backslash that continues a command on the next line, and the page would
    show each line as a command of its own (pasted, two broken commands)."""
    out: list[str] = []
    rest = iter(lines)
    for line in rest:
        if line.strip() not in ("| Example:", "| Examples:"):
            out.append(line.replace("*", "\\*"))
            continue
        out += [line.removeprefix("| "), "", ".. code-block:: shell", ""]
        for example in rest:  # sphinx-click marks the lines of a \b block with "| ", up to a blank line
            if not example.startswith("| "):
                out += ["", example.replace("*", "\\*")]
                break
            out.append("   " + example.removeprefix("| "))
    lines[:] = out


#: The marker a page puts above a block that is a file of its example (the docs test writes
#: the block to that file); the reader sees the name too.
_FILE_MARKER = re.compile(r"^<!-- file: (\S+) -->$", re.MULTILINE)


def _show_file_names(app: object, docname: str, source: list[str]) -> None:
    """Show ``<!-- file: NAME -->`` as a caption line (``NAME:``) above its block."""
    source[0] = _FILE_MARKER.sub(lambda m: f"{m.group(0)}\n\n`{m.group(1)}`:\n", source[0])


_PARAM = re.compile(r"^:param (?:[^:]+ )?(\w+):\s*\S", re.MULTILINE)


def parameters(obj: Any) -> list[str]:
    """The parameters a reader passes to ``obj`` (a function, method or class): not ``self``,
    not ``*args``/``**kwargs``."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    skipped = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return [p.name for p in signature.parameters.values() if p.name not in ("self", "cls") and p.kind not in skipped]


def _field_docs(cls: type) -> dict[str, str]:
    """The ``#:`` comments above a class's fields (a dataclass's parameters), by field name."""
    from sphinx.pycode import ModuleAnalyzer

    try:
        found = ModuleAnalyzer.for_module(cls.__module__).find_attr_docs()
    except Exception:  # noqa: BLE001 - a class without source has no field comments
        return {}
    return {attr: " ".join(line.strip() for line in doc).strip() for (owner, attr), doc in found.items()
            if owner == cls.__qualname__}  # fmt: skip


def describe_parameters(app: object, what: str, name: str, obj: Any, options: object, lines: list[str]) -> None:
    """Give each parameter the docstring does not describe its description from the query
    options' (:data:`tsstore.read.query.OPTION_HELP`), its module's ``PARAMETER_HELP`` or,
    for a class, its field's ``#:`` comment; so every parameter of the reference has a
    description, written once."""
    if what not in ("function", "method", "class"):
        return
    lines[:] = _bullets_as_fields(lines, set(parameters(obj)))
    described = set(_PARAM.findall("\n".join(lines)))
    fields = _field_docs(obj) if inspect.isclass(obj) else {}
    glossary = {**OPTION_HELP, **getattr(inspect.getmodule(obj), "PARAMETER_HELP", {})}  # the verb's module's
    added = []
    for param in parameters(obj):
        text = fields.get(param) or glossary.get(param)
        if param not in described and text:
            added.append(f":param {param}: {text}")
    if added:
        lines.extend(["", *added])


_BULLET = re.compile(r"^- ``(\w+)``: (.*)$")


def _bullets_as_fields(lines: list[str], params: set[str]) -> list[str]:
    """A docstring's list of parameters (``- ``name``: text``, continued on lines indented
    two spaces) as parameter fields, so the reference shows each with its description."""
    out: list[str] = []
    fields: list[str] = []
    current = False  # whether the last line belongs to the last field
    for line in lines:
        found = _BULLET.match(line)
        if found and found.group(1) in params:
            fields.append(f":param {found.group(1)}: {found.group(2)}")
            current = True
        elif current and line.startswith("  ") and line.strip():
            fields[-1] += " " + line.strip()
        else:
            current = False
            out.append(line)
    return [*out, "", *fields] if fields else out


def undescribed(obj: Any, lines: list[str]) -> list[str]:
    """The parameters of ``obj`` that its reference entry (``lines``, after napoleon and
    :func:`describe_parameters`) leaves without a description."""
    described = set(_PARAM.findall("\n".join(lines)))
    return [p for p in parameters(obj) if p not in described]


def _exported_name(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """Link ``tsstore.store.TimeSeriesStore.bars`` (a docstring names the defining module) to
    the entry the reference has, ``tsstore.TimeSeriesStore.bars`` (documented where users
    import it from), and the other way round."""
    target = node.get("reftarget", "")
    if node.get("refdomain") != "py" or not target.startswith("tsstore."):
        return None
    domain = env.get_domain("py")
    parts = target.split(".")
    for size in range(len(parts) - 1, 0, -1):
        tail = ".".join(parts[-size:])
        for candidate in [f"tsstore.{tail}", *(name for name in domain.objects if name.endswith("." + tail))]:
            if candidate != target and candidate in domain.objects:
                return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], candidate, node,
                                           contnode)  # fmt: skip
    return None


def _defining_modules() -> dict[str, str]:
    """Where each name ``tsstore`` exports is defined, from the stub its loader reads."""
    import ast

    import tsstore

    stub = ast.parse(Path(tsstore.__file__).with_name("__init__.pyi").read_text())
    return {alias.name: f"tsstore{node.module and '.' + node.module}" for node in stub.body
            if isinstance(node, ast.ImportFrom) for alias in node.names}  # fmt: skip


def alias_docs(app: object, what: str, name: str, obj: Any, options: object, lines: list[str]) -> None:
    """An exported type alias (``tsstore.TimeLike``) described by the ``#:`` comment above it
    in its module, not by the docstring of the kind of object it is (a union)."""
    from sphinx.pycode import ModuleAnalyzer

    module, _, attr = name.rpartition(".")
    if what != "data" or module != "tsstore":
        return
    defined = _defining_modules().get(attr)
    comment = ModuleAnalyzer.for_module(defined).find_attr_docs().get(("", attr)) if defined else None
    if comment:
        lines[:] = [line for line in comment if line.strip()]


def setup(app: object) -> None:
    app.connect("autodoc-process-docstring", alias_docs)  # type: ignore[attr-defined]
    app.connect("missing-reference", _exported_name)  # type: ignore[attr-defined]
    app.connect("autodoc-process-docstring", describe_parameters, priority=600)  # type: ignore[attr-defined]
    app.connect("sphinx-click-process-description", _literal_help)  # type: ignore[attr-defined]
    app.connect("source-read", _show_file_names)  # type: ignore[attr-defined]
