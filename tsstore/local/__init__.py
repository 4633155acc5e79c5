"""The local wing: the Firestore emulator, its supervisor, synthetic ticks (the pytest plugin
that starts the emulator for a test run is :mod:`tsstore.pytest_plugin`).

:func:`local_client` is the one name most users want from here: a client on the emulator,
the way the CLI finds it.
"""

from tsstore.local.connect import local_client

__all__ = ["local_client"]
