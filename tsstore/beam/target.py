"""Where a pipeline's workers read and write: a project, a database, and the emulator's
address when there is one, in either database mode. Workers make their own clients from it
(a client does not travel between processes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from tsstore.databases import location_of, mode_of
from tsstore.errors import ConfigError
from tsstore.wire import emulator_host, quick_reconnects


@dataclass(frozen=True)
class Target:
    """A database as a worker reaches it: ``emulator`` is the emulator's ``host:port``
    (``None`` for Google Cloud, where the worker's service account is used); ``mode``
    ``"datastore"`` for Firestore in Datastore mode, whose entities may live in a
    ``namespace``."""

    project: str
    database: str = "(default)"
    emulator: str | None = None
    mode: Literal["native", "datastore"] = "native"
    namespace: str | None = None

    @classmethod
    def of(cls, client: Any) -> Target:
        """The database ``client`` (a Firestore or a Datastore client) talks to; a memory
        database is refused (it lives in this process: a worker cannot reach it)."""
        mode = mode_of(client)
        if mode == "memory":
            raise ConfigError(f"{client!r} is a memory database, which a pipeline's workers cannot reach (it lives in "
                              "this process); give a firestore.Client or a datastore.Client")  # fmt: skip
        project, database = location_of(client)
        if mode == "datastore":
            endpoint = str(getattr(client, "_base_url", "") or "")
            emulator = endpoint.removeprefix("http://") if endpoint.startswith("http://") else None
            return cls(project, database, emulator, "datastore", client.namespace)
        return cls(project, database, emulator_host(client))

    def client(self) -> Any:
        """A new sync client for this database (a ``datastore.Client`` in Datastore mode)."""
        if self.mode == "datastore":
            return self._datastore_client()
        if self.emulator is not None:
            from tsstore.local.emulator import emulator_client

            return emulator_client(self.emulator, project=self.project, database=self.database)
        from google.cloud import firestore

        return quick_reconnects(firestore.Client(project=self.project, database=self.database))

    def _datastore_client(self) -> Any:
        if self.emulator is not None:
            from tsstore.local.emulator import datastore_client

            return datastore_client(self.emulator, project=self.project, database=self.database,
                                    namespace=self.namespace)  # fmt: skip
        from google.cloud import datastore

        database = "" if self.database == "(default)" else self.database
        return datastore.Client(project=self.project, database=database, namespace=self.namespace)  # type: ignore[no-untyped-call]

    def key(self, collection: str) -> str:
        """One collection of this database, named fully (process-wide limiters are keyed by it)."""
        space = f"/{self.namespace}" if self.namespace else ""
        return f"{self.emulator or 'cloud'}/{self.project}/{self.database}{space}/{collection}"
