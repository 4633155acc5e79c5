"""Live data: the newest ticks kept current (:func:`watch <tsstore.store.TimeSeriesStore.watch>`)
and every new tick as it is written (:func:`tail <tsstore.store.TimeSeriesStore.tail>`), over
all shard chunks. :mod:`~tsstore.live.state` decides (no I/O); :mod:`~tsstore.live.listen`
asks for them as data and runs one listener per chunk query on the database's own listeners
(Native mode's, the memory database's), feeding the state."""
