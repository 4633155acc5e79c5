"""Firestore in Datastore mode's wire: values and keys (:mod:`~tsstore.dswire.values`), the
queries built from tsstore's plans (:mod:`~tsstore.dswire.queries`), value filters asked with
Native mode's answers (:mod:`~tsstore.dswire.kinds`), and the one place that calls a
``google.cloud.datastore.Client`` (:mod:`~tsstore.dswire.calls`). Its modules are imported
only for such a client (``google-cloud-datastore`` is the ``datastore`` extra); this one tells
such a client without importing it."""

from __future__ import annotations

from typing import Any


def is_datastore_client(client: Any) -> bool:
    """Whether ``client`` is a ``google.cloud.datastore.Client`` (told without importing the
    package, which users of Native mode need not install)."""
    return type(client).__module__.startswith("google.cloud.datastore")
