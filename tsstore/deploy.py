"""``firebase.json``: the file ``firebase deploy`` reads, naming the index and rules files.

``firebase deploy --only firestore:rules,firestore:indexes`` run in a folder deploys the
files its ``firebase.json`` names under ``firestore``. tsstore writes its generated files
next to one and makes sure it names them, keeping whatever else it holds.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import json5

from tsstore.errors import ConfigError

FIREBASE_JSON = "firebase.json"
DeployedFile = Literal["indexes", "rules"]


@dataclass(frozen=True)
class FirebaseJsonUpdate:
    """What naming one file in a folder's ``firebase.json`` needs: the new text (``None`` when
    nothing changes) and a warning when the file is left as it is for a reason."""

    path: Path
    new_text: str | None
    warning: str | None = None

    def write(self) -> Path | None:
        if self.new_text is None:
            return None
        self.path.write_text(self.new_text, encoding="utf-8")
        return self.path


def plan_firebase_json(folder: Path, kind: DeployedFile, name: str) -> FirebaseJsonUpdate:
    """The update that makes ``folder/firebase.json`` name ``name`` as the Firestore ``kind``
    file: a new file if there is none, the key added if it is missing. A file that names
    another file, configures several databases (a list), or does not parse is left alone,
    with a warning that says so."""
    path = folder / FIREBASE_JSON
    if not path.exists():
        return FirebaseJsonUpdate(path, _render({"firestore": {kind: name}}))
    text = path.read_text(encoding="utf-8")
    try:
        config: Any = json5.loads(text) if text.strip() else {}
    except ValueError as exc:
        return FirebaseJsonUpdate(path, None, f"{path} does not parse ({exc}); it should name {name} as {kind}")
    firestore = config.get("firestore", {}) if isinstance(config, dict) else None
    if not isinstance(firestore, dict):
        return FirebaseJsonUpdate(
            path,
            None,
            f"{path} configures Firestore as a list (several databases) or not as an object; "
            f"name {name} as its {kind!r} file yourself",
        )
    named = firestore.get(kind)
    if named == name:
        return FirebaseJsonUpdate(path, None)
    if named is not None:
        return FirebaseJsonUpdate(
            path, None, f"{path} names {named!r} as the Firestore {kind} file, not {name!r}; left as it is"
        )
    firestore[kind] = name
    config["firestore"] = firestore
    kept = _is_plain_json(text)
    warning = None if kept else f"comments and trailing commas in {path} are not kept in the rewritten file"
    return FirebaseJsonUpdate(path, _render(config), warning)


def _render(config: Any) -> str:
    return json.dumps(config, indent=2, ensure_ascii=False) + "\n"


def _is_plain_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class GeneratedFile:
    """What updating one generated file (and the ``firebase.json`` beside it) would do;
    nothing is written until :meth:`write`."""

    path: Path
    old_text: str | None
    new_text: str
    firebase: FirebaseJsonUpdate

    @property
    def changed(self) -> bool:
        """Whether the file, or the ``firebase.json`` beside it, is not yet what it should be."""
        return self.old_text != self.new_text or self.firebase.new_text is not None

    def diff(self) -> str:
        """A unified diff from the file on disk to the declared one, and a line for a
        ``firebase.json`` that does not name it."""
        label = str(self.path)
        lines = difflib.unified_diff(
            (self.old_text or "").splitlines(keepends=True),
            self.new_text.splitlines(keepends=True),
            f"{label} (on disk)",
            f"{label} (declared)",
        )
        text = "".join(lines) if self.old_text is not None else f"{label} does not exist\n"
        if self.firebase.new_text is not None:
            text += f"{self.firebase.path} does not name {self.path.name}\n"
        return text

    def write(self) -> list[Path]:
        """Write the file where it changed, and the ``firebase.json`` beside it where it does
        not name it, making its folder if there is none; the paths written."""
        folder = self.path.parent
        blocked = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), None)
        if blocked is not None:
            raise ConfigError(f"cannot write {self.path}: {blocked} is a file, not a folder")
        folder.mkdir(parents=True, exist_ok=True)
        written: list[Path] = []
        if self.old_text != self.new_text:
            self.path.write_text(self.new_text, encoding="utf-8")
            written.append(self.path)
        named = self.firebase.write()
        return written + ([named] if named is not None else [])
