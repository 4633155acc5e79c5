"""The memory backend: an in-process database with Firestore's semantics for everything
tsstore asks of one (:mod:`tsstore.memory.database`), and a store's answers on it
(:mod:`tsstore.memory.answers`), so code that uses tsstore can be tested without Java.
What it models and what it does not: ``docs/explanation/memory-backend.md``."""

from tsstore.memory.answers import MemoryAnswers
from tsstore.memory.database import MemoryDatabase, Query

__all__ = ["MemoryAnswers", "MemoryDatabase", "Query"]
