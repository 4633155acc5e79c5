"""Live data: the newest ticks kept current (:func:`watch <tsstore.store.TimeSeriesStore.watch>`)
and every new tick as it is written (:func:`tail <tsstore.store.TimeSeriesStore.tail>`), over
all shard chunks. :mod:`~tsstore.live.state` decides (no I/O); :mod:`~tsstore.live.listen`
runs one Firestore listener per chunk query and feeds it."""
