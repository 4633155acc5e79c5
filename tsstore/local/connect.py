"""A client for local work: the emulator ``FIRESTORE_EMULATOR_HOST`` names, else the local store.

The CLI's data commands and :func:`local_client` resolve the same way, so a script and
``tsstore query`` run side by side see the same documents.
"""

from __future__ import annotations

import os
from typing import Any

from tsstore.local import supervisor
from tsstore.local.emulator import DEFAULT_DATABASE, DEFAULT_PROJECT, Mode, emulator_client

EMULATOR_ENV = "FIRESTORE_EMULATOR_HOST"
#: What names the emulator in Datastore mode (``gcloud beta emulators datastore env-init`` sets it).
DATASTORE_EMULATOR_ENV = "DATASTORE_EMULATOR_HOST"


def emulator_project(mode: Mode = "native") -> str:
    """The project an emulator client uses: ``GOOGLE_CLOUD_PROJECT`` (in Datastore mode
    ``DATASTORE_PROJECT_ID`` first), else tsstore's default."""
    named = os.environ.get("DATASTORE_PROJECT_ID") if mode == "datastore" else None
    return named or os.environ.get("GOOGLE_CLOUD_PROJECT") or DEFAULT_PROJECT


def local_client(*, database: str = DEFAULT_DATABASE, asynchronous: bool = False) -> Any:
    """A Firestore client on an emulator, never on a production project.

    With ``FIRESTORE_EMULATOR_HOST`` set, the client goes to that emulator (project
    ``GOOGLE_CLOUD_PROJECT``, else ``tsstore-local``, as the CLI's). Otherwise it goes to the
    local store, the background emulator of ``tsstore emulator start``, started now if it is
    not running; its data lives in ``$TSSTORE_HOME`` and outlives the process. A
    ``firestore.AsyncClient`` if ``asynchronous``. In production make the client yourself:
    ``firestore.Client(project=...)``.
    """
    address = os.environ.get(EMULATOR_ENV)
    project = emulator_project()
    if not address:
        store, _ = supervisor.start()
        supervisor.remember_database(database)
        address, project = store.address, store.project
    return emulator_client(address, project=project, database=database, asynchronous=asynchronous)
