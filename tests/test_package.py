"""The package as an ecosystem user meets it: a version, a license, metadata that says where
the project lives."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import tsstore

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_is_the_installed_distributions() -> None:
    assert tsstore.__version__ == importlib.metadata.version("tsstore") != "0+unknown"
    assert "__version__" in tsstore.__all__


def test_the_license_and_metadata_agree() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().lstrip().startswith("Apache License\n")
    meta = importlib.metadata.metadata("tsstore")
    assert meta["License-Expression"] == "Apache-2.0"
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(urls)
    assert "Typing :: Typed" in (meta.get_all("Classifier") or [])
    assert (ROOT / "CHANGELOG.md").read_text().startswith("# Changelog")
