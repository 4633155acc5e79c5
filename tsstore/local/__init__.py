"""The local wing: the Firestore emulator, its supervisor, the pytest plugin, synthetic ticks."""
