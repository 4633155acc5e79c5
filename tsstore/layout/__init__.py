"""The shard layout: the census of shard values and the capacity planner (pure logic; the
verbs are :mod:`tsstore.verbs.layout`)."""
