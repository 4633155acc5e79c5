"""Charts of bars and ticks, drawn with matplotlib (the optional extra ``tsstore[plot]``).

:func:`plot_bars` draws one panel per series: candlesticks (green when the close is at or
above the open, red below) and, when the bars have a volume, volume bars under them.
:func:`plot_lines` draws one line per series. The file's suffix picks the format: ``.png``,
``.svg`` or ``.pdf``. Every series' artists carry the id ``series:<key>``, which an SVG keeps,
so a chart can be checked for what it holds.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tsstore.errors import PlotError

#: The file formats a chart is written in (by suffix).
CHART_FORMATS = (".png", ".svg", ".pdf")
#: Series drawn at most in one chart (panels or lines); more would be unreadable.
MAX_SERIES = 12


def plot_bars(bars: pd.DataFrame, path: str | Path, *, title: str = "", by: Sequence[str] = ()) -> int:
    """Write a candlestick chart of ``bars`` (as :meth:`TimeSeriesStore.bars
    <tsstore.store.TimeSeriesStore.bars>` returns them) to ``path``; returns the number of
    series drawn."""
    plt, target = _pyplot(path)
    from matplotlib import dates

    groups = _groups(bars, by)
    with_volume = "volume" in bars.columns
    figure, axes = plt.subplots(
        len(groups) * (2 if with_volume else 1), 1, sharex=True, squeeze=False,
        figsize=(11, 2.6 * len(groups) + (0.9 * len(groups) if with_volume else 0)),
        gridspec_kw={"height_ratios": [3, 1] * len(groups) if with_volume else [1] * len(groups)},
    )  # fmt: skip
    for number, (key, frame) in enumerate(groups):
        row = number * (2 if with_volume else 1)
        price_axes = axes[row][0]
        starts = _times(frame)
        width = _width(starts)
        x = dates.date2num(starts)
        opens, closes = frame["open"].astype("float64"), frame["close"].astype("float64")
        highs, lows = frame["high"].astype("float64"), frame["low"].astype("float64")
        colors = ["#26a269" if c >= o else "#c01c28" for o, c in zip(opens, closes)]
        price_axes.vlines(x + width / 2, lows, highs, colors=colors, linewidth=0.8, gid=f"series:{key}")
        bodies = (closes - opens).abs().clip(lower=1e-12)  # a doji still shows a line
        price_axes.bar(x, bodies, width, bottom=opens.where(opens < closes, closes), color=colors, align="edge")
        price_axes.set_ylabel(str(key) if key != "" else "price")
        price_axes.xaxis_date()
        price_axes.grid(alpha=0.3)
        if with_volume:
            volume_axes = axes[row + 1][0]
            volume_axes.bar(x, frame["volume"].astype("float64"), width, color="#77767b", align="edge")
            volume_axes.set_ylabel("volume")
    if title:
        axes[0][0].set_title(title)
    _time_axis(axes[-1][0])
    figure.autofmt_xdate()
    figure.tight_layout()
    figure.savefig(target)
    plt.close(figure)
    return len(groups)


def plot_lines(frame: pd.DataFrame, path: str | Path, *, y: str, by: Sequence[str] = (), title: str = "") -> int:
    """Write a chart with one line of column ``y`` over time per series (the values of the
    ``by`` columns) of a tick frame (time-indexed, as :func:`~tsstore.frames.ticks_to_frame`
    makes it) to ``path``; returns the number of series drawn."""
    if y not in frame.columns:
        raise PlotError(f"no column {y!r} to plot; columns: {', '.join(map(str, frame.columns)) or 'none'}")
    missing = [b for b in by if b not in frame.columns]
    if missing:
        raise PlotError(f"no column {missing[0]!r} to group by; columns: {', '.join(map(str, frame.columns))}")
    plt, target = _pyplot(path)
    ordered = frame.sort_index()
    groups = [("", ordered)] if not by else list(ordered.groupby(list(by), sort=True))
    if len(groups) > MAX_SERIES:
        raise PlotError(f"{len(groups)} series to draw; at most {MAX_SERIES} fit one chart (filter with --where)")
    figure, axes = plt.subplots(figsize=(11, 4.5))
    for key, part in groups:
        label = _label(key)
        axes.plot(part.index, part[y].astype("float64"), linewidth=0.9, label=label or y, gid=f"series:{label}")
    axes.set_ylabel(y)
    axes.grid(alpha=0.3)
    if by:
        axes.legend(loc="best", fontsize="small")
    if title:
        axes.set_title(title)
    _time_axis(axes)
    figure.autofmt_xdate()
    figure.tight_layout()
    figure.savefig(target)
    plt.close(figure)
    return len(groups)


def _time_axis(axes: Any) -> None:
    """Times on the x axis with their date and year, in UTC, and said to be UTC."""
    from matplotlib import dates

    axes.xaxis.set_major_formatter(dates.DateFormatter("%Y-%m-%d %H:%M", tz=dt.timezone.utc))
    axes.set_xlabel("time (UTC)")


def _pyplot(path: str | Path) -> tuple[Any, Path]:
    target = Path(path)
    if target.suffix.lower() not in CHART_FORMATS:
        raise PlotError(f"cannot write a chart to {str(target)!r}: give a file ending in {', '.join(CHART_FORMATS)}")
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotError("charts need matplotlib: pip install 'tsstore[plot]'") from None
    return plt, target


def _groups(bars: pd.DataFrame, by: Sequence[str]) -> list[tuple[str, pd.DataFrame]]:
    if bars.empty:
        raise PlotError("no bars to draw (no tick in the range)")
    if not by:
        return [("", bars)]
    groups = [(_label(key), part.droplevel(list(by))) for key, part in bars.groupby(level=list(by), sort=True)]
    if len(groups) > MAX_SERIES:
        raise PlotError(f"{len(groups)} series to draw; at most {MAX_SERIES} fit one chart (filter with --where)")
    return groups


def _label(key: Any) -> str:
    parts = key if isinstance(key, tuple) else (key,)
    return "/".join("" if p is None else str(p) for p in parts)


def _times(frame: pd.DataFrame) -> list[dt.datetime]:
    return [t.to_pydatetime() for t in frame.index]


def _width(starts: list[dt.datetime]) -> float:
    """Candle width in days (matplotlib's date unit): 80 % of the smallest gap between bars."""
    gaps = [(b - a).total_seconds() for a, b in zip(starts, starts[1:]) if b > a]
    return 0.8 * (min(gaps) if gaps else 60.0) / 86_400
