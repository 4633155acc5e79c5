"""Firestore limits that shape tsstore's design, named once.

Values come from Firestore's documentation and were checked on the local emulator
(see the README's "Limits" section). Everything that depends on them derives from
these names; no other module writes the numbers again.
"""

from __future__ import annotations

#: Sustained writes/s a collection takes while an indexed field grows monotonically.
SEQUENTIAL_WRITES_PER_SECOND = 500

#: Sustained writes/s one document takes (why hot counters are sharded).
DOCUMENT_WRITES_PER_SECOND = 1

#: Largest ``limit`` a query takes (a signed 32-bit integer on the wire).
MAX_QUERY_LIMIT = 2**31 - 1

#: Most values one ``in`` filter may list.
MAX_IN_VALUES = 30
#: Most values one ``not-in`` filter may list ("'NOT_IN' supports up to 10 comparison values").
MAX_NOT_IN_VALUES = 10

#: Most disjunctions a query may have after normalisation to disjunctive normal form:
#: ``shard in [a]`` x ``symbol in [b]`` expands to ``len(a) * len(b)`` disjunctions.
MAX_DISJUNCTIONS = 30

#: Most fields one query may filter by range or ``!=`` (the timestamp range is one of them).
MAX_INEQUALITY_FIELDS = 10

#: Largest document Firestore stores (1 MiB), counted as Firestore's storage-size rules count.
MAX_DOCUMENT_BYTES = 1_048_576

#: Most bytes of an indexed value Firestore compares in a query, as it counts a value's size
#: (a text: its UTF-8 bytes and one; bytes: their length). A filter on a larger value is
#: refused by Firestore in both database modes (measured on the emulator: Native mode refuses a
#: text of 1 500 UTF-8 bytes, Datastore mode one of 1 501), so no filter finds a larger value
#: stored: Native mode indexes its first 1 500 bytes, Datastore mode stores it unindexed.
MAX_INDEXED_VALUE_BYTES = 1500


def indexed_size(value: object) -> int | None:
    """The size Firestore counts ``value`` as against :data:`MAX_INDEXED_VALUE_BYTES` when it
    is a text (its UTF-8 bytes and one) or bytes (their length); ``None`` for other values."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass")) + 1
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    return None

#: Deepest nesting of maps and arrays below a document's root (checked on the emulator:
#: 20 nested maps are stored, 21 refused; an array counts as a level).
MAX_FIELD_DEPTH = 20

#: Largest integer a Firestore integer value holds (signed 64-bit).
MAX_INT64 = 2**63 - 1
MIN_INT64 = -(2**63)

#: The ramp-up rule for new traffic ("500/50/5"): start at 500 ops/s and grow by 50 %
#: every 5 minutes. google-cloud-firestore's BulkWriter implements exactly this growth.
RAMP_START_OPS_PER_SECOND = 500

#: A named database's id: 4-63 characters of lowercase letters, digits and hyphens, a letter
#: first, no hyphen last (and not shaped like a UUID); ``(default)`` is the default database.
DATABASE_ID_PATTERN = r"[a-z][a-z0-9-]{2,61}[a-z0-9]"
DEFAULT_DATABASE_ID = "(default)"
