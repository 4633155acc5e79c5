"""tsstore: high-rate time series in Google Cloud Firestore with sharded timestamps.

The names this package exports are listed in ``__init__.pyi`` (which type checkers read) and
imported from their modules on first use, so a command that needs none of them (``tsstore
emulator status``, the local store's supervisor) does not import pandas or the Firestore
client.
"""

from __future__ import annotations

import logging as _logging
from importlib import metadata as _metadata

import lazy_loader as _lazy

# Quiet until the application configures logging: without a handler of its own, Python would
# print the package's warnings on stderr itself (``logging.lastResort``). See tsstore.logs.
_logging.getLogger(__name__).addHandler(_logging.NullHandler())

__getattr__, __dir__, __all__ = _lazy.attach_stub(__name__, __file__)
__all__ = ["__version__", *__all__]

#: Earlier names, kept so that existing imports keep working ("plan" now means a query plan only).
_RENAMED = {"plan_shards": "shards_for", "plan_capacity": "capacity_for", "CapacityPlan": "Capacity"}
_exported = __getattr__


def __getattr__(name: str) -> object:  # noqa: F811 - the loader's, with the earlier names
    return _exported(_RENAMED.get(name, name))


try:
    __version__ = _metadata.version("tsstore")  # the installed distribution's, one source: pyproject.toml
except _metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
