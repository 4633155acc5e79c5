"""Analytics: aggregates combined across shards, the newest tick per series, OHLCV bars,
stored roll-ups and charts (pure logic; the verbs that ask Firestore are
:mod:`tsstore.verbs.aggregates`, :mod:`~tsstore.verbs.latest`, :mod:`~tsstore.verbs.bars`,
:mod:`~tsstore.verbs.asof` and :mod:`~tsstore.verbs.rollups`)."""

#: What each parameter of the analytics verbs means, once for every verb that takes it
#: (:mod:`tsstore.verbs.aggregates`, :mod:`~tsstore.verbs.bars`, :mod:`~tsstore.verbs.asof`,
#: :mod:`~tsstore.verbs.latest`; the API reference describes a parameter from here unless the
#: verb's docstring says more).
PARAMETER_HELP = {
    "interval": "the bucket length: a duration (``\"1min\"``, ``\"15min\"``, ``\"1h\"``, a ``timedelta``) "
    "or a calendar unit in ``tz`` (``\"1D\"``, ``\"1W\"``, ``\"1M\"``)",
    "price": "the numeric field the bars' open, high, low and close are of (``\"price.micros\"``); "
    "``None``: the declared roll-ups' price",
    "by": "the field(s) whose values name a series (``\"symbol\"``): one set of rows per series, equal "
    "on both sides of an as-of join",
    "volume": "the numeric field summed into each bar's ``volume``; ``None``: no volume",
    "tz": "the zone buckets are laid out in and the index is shown in (``\"America/New_York\"``); "
    "``None``: UTC",
    "origin": "where fixed buckets start: an instant, or a time of day read in ``tz`` (``\"09:30\"``): edges "
    "at that local time on every day, for an interval that divides 24 h; ``None``: midnight of 1970-01-01 in ``tz``",
    "fill": "buckets without a tick: ``None`` (no row), ``\"prev\"`` (the last close carried, amounts 0) "
    "or ``\"nan\"`` (missing prices)",
    "moments": "add each bar's ``sum``, ``mean`` and ``std`` of the price and the times of its open and close",
    "combine": "read a roll-up's stored bars (a store on ``rollup.spec``) and combine them into these "
    "longer ones instead of reading ticks",
    "value": "what each series' column holds: ``\"close\"`` (default), ``\"open\"``, ``\"high\"``, "
    "``\"low\"``, ``\"mean\"``, ``\"std\"``, ``\"count\"``, ``\"volume\"`` or ``\"sum\"``",
    "left": "the :class:`~tsstore.read.query.Query` of the ticks to match (every one gives a row)",
    "right": "the :class:`~tsstore.read.query.Query` of the ticks matched from; its range defaults to what "
    "can match the left's (one ``tolerance`` around it)",
    "right_spec": "the declared series the right side reads; ``None``: this store's own",
    "tolerance": "the longest time between a tick and its match (``\"5s\"``, a ``timedelta``); "
    "``None``: any",
    "allow_exact_matches": "whether a right tick at the very time of the left one may match",
    "prefix": "the prefix of the matched tick's columns (``right.price.micros``)",
    "ids": "add the matched tick's document id as a column (``right.id``)",
    "count": "whether to count the ticks",
    "sum": "measures (declared ``measures``) to sum",
    "avg": "measures to average",
    "min": "fields whose least value to give (from the roll-ups' bars: needs ``rollups``)",
    "max": "fields whose greatest value to give (from the roll-ups' bars: needs ``rollups``)",
    "std": "fields whose standard deviation to give (from the roll-ups' bars: needs ``rollups``)",
    "rollups": "roll-ups of this series whose stored bars answer where they cover the range",
    "values": "the series' values of ``by``, in the order of the rows",
    "before": "the instant the newest tick is taken before (exclusive; or ``end``); ``None``: the newest of all",
}
