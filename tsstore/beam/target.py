"""Where a pipeline's workers read and write: a project, a database, and the emulator's
address when there is one. Workers make their own clients from it (a client does not
travel between processes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tsstore.wire import database_id, emulator_host, quick_reconnects


@dataclass(frozen=True)
class Target:
    """A Firestore database as a worker reaches it: ``emulator`` is the emulator's
    ``host:port`` (``None`` for Google Cloud, where the worker's service account is used)."""

    project: str
    database: str = "(default)"
    emulator: str | None = None

    @classmethod
    def of(cls, client: Any) -> Target:
        """The database ``client`` talks to."""
        return cls(str(client.project), database_id(client), emulator_host(client))

    def client(self) -> Any:
        """A new sync client for this database."""
        if self.emulator is not None:
            from tsstore.local.emulator import emulator_client

            return emulator_client(self.emulator, project=self.project, database=self.database)
        from google.cloud import firestore

        return quick_reconnects(firestore.Client(project=self.project, database=self.database))

    def key(self, collection: str) -> str:
        """One collection of this database, named fully (process-wide limiters are keyed by it)."""
        return f"{self.emulator or 'cloud'}/{self.project}/{self.database}/{collection}"
