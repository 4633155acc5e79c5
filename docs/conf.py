"""Sphinx configuration for tsstore's documentation site (``sphinx-build -W docs docs/_build``).

Sphinx, not MkDocs: tsstore's docstrings are written in reStructuredText (``:class:`` and
``:func:`` roles, double-backquoted code), which autodoc renders and cross-links as they
are; pages are Markdown through MyST, and the CLI reference comes from click itself
(sphinx-click), so neither can drift from the code.
"""

from __future__ import annotations

import logging
import re

import tsstore

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


def _literal_stars(app: object, ctx: object, lines: list[str]) -> None:
    """Help texts are plain text: a glob's ``*`` is not reStructuredText emphasis."""
    lines[:] = [line.replace("*", "\\*") for line in lines]


#: The marker a page puts above a block that is a file of its example (the docs test writes
#: the block to that file); the reader sees the name too.
_FILE_MARKER = re.compile(r"^<!-- file: (\S+) -->$", re.MULTILINE)


def _show_file_names(app: object, docname: str, source: list[str]) -> None:
    """Show ``<!-- file: NAME -->`` as a caption line (``NAME:``) above its block."""
    source[0] = _FILE_MARKER.sub(lambda m: f"{m.group(0)}\n\n`{m.group(1)}`:\n", source[0])


def setup(app: object) -> None:
    app.connect("sphinx-click-process-description", _literal_stars)  # type: ignore[attr-defined]
    app.connect("source-read", _show_file_names)  # type: ignore[attr-defined]
