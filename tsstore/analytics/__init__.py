"""Analytics: aggregates combined across shards, the newest tick per series, OHLCV bars,
stored roll-ups and charts (pure logic; the verbs that ask Firestore are :mod:`tsstore.verbs.analytics`)."""
