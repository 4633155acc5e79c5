"""Sphinx configuration for tsstore's documentation site (``sphinx-build -W docs docs/_build``).

Sphinx, not MkDocs: tsstore's docstrings are written in reStructuredText (``:class:`` and
``:func:`` roles, double-backquoted code), which autodoc renders and cross-links as they
are; pages are Markdown through MyST, and the CLI reference comes from click itself
(sphinx-click), so neither can drift from the code.
"""

from __future__ import annotations

import tsstore

project = "tsstore"
author = "The tsstore authors"
copyright = "2026, The tsstore authors"
release = version = tsstore.__version__

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.intersphinx", "sphinx_click"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "*.png"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "inherited-members": "BaseException", "show-inheritance": False}
nitpicky = False

html_theme = "furo"
html_title = f"tsstore {version}"


def _literal_stars(app: object, ctx: object, lines: list[str]) -> None:
    """Help texts are plain text: a glob's ``*`` is not reStructuredText emphasis."""
    lines[:] = [line.replace("*", "\\*") for line in lines]


def setup(app: object) -> None:
    app.connect("sphinx-click-process-description", _literal_stars)  # type: ignore[attr-defined]
