"""The read engine: chunk readers, lean fetching, the merge and what a read costs.

The store plans a query (:mod:`tsstore.read.plan`) and builds each chunk's Firestore query;
this package decides how much to ask each chunk for, fetches concurrently at one snapshot,
merges in query order and counts what the server returned. It receives fetch functions and
a thread pool, never the store.
"""
