"""Charts drawn on the server as inline SVG: bars (stacked) and lines over the period's days or
weeks, with an optional reference line (the refusal target). Colours come from CSS classes
(static/css/insights.css, light and dark), every mark carries a `<title>` read on hover, and
the page shows the same numbers in a table; no script
(docs/decisions/0121-insights-charts-server-rendered-svg.md).

All text is escaped (`format_html`); the functions return safe HTML."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 640, 220
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 12, 28
MAX_X_LABELS = 8

Format = Callable[[float], str]


@dataclass(frozen=True)
class Series:
    name: str
    css: str  # the class colouring it, e.g. "series-answered"
    values: Sequence[float | None]


@dataclass(frozen=True)
class Reference:
    value: float
    label: str


def number(value: float) -> str:
    """12,345; 2.5 (a half is kept: the middle grid line of a scale of 5)."""
    return f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"


def percent(value: float) -> str:
    return f"{value * 100:.0f}%"


def milliseconds(value: float) -> str:
    """ "850 ms" below a second, "1.2 s" from there."""
    return f"{value:,.0f} ms" if value < 1000 else f"{value / 1000:,.1f} s"


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10ⁿ at least `value` (1 for nothing to show)."""
    if value <= 0:
        return 1.0
    exponent = math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        ceiling = step * 10**exponent
        if ceiling >= value - 1e-12:
            return float(ceiling)
    return float(10 ** (exponent + 1))


def _x_label_indexes(count: int) -> list[int]:
    if count <= MAX_X_LABELS:
        return list(range(count))
    step = math.ceil(count / MAX_X_LABELS)
    return list(range(0, count, step))


def _frame(*, labels: Sequence[str], top: float, fmt: Format) -> list[SafeString]:
    """The axes: three horizontal grid lines with their values, and the x labels."""
    plot_h = HEIGHT - TOP - BOTTOM
    parts = []
    for fraction in (0.0, 0.5, 1.0):
        y = TOP + plot_h * (1 - fraction)
        parts.append(
            format_html(
                '<line class="grid" x1="{}" x2="{}" y1="{}" y2="{}"/>'
                '<text class="axis" x="{}" y="{}" text-anchor="end">{}</text>',
                LEFT,
                WIDTH - RIGHT,
                f"{y:.1f}",
                f"{y:.1f}",
                LEFT - 6,
                f"{y + 4:.1f}",
                fmt(top * fraction),
            )
        )
    slot = (WIDTH - LEFT - RIGHT) / max(1, len(labels))
    for index in _x_label_indexes(len(labels)):
        parts.append(
            format_html(
                '<text class="axis" x="{}" y="{}" text-anchor="middle">{}</text>',
                f"{LEFT + slot * (index + 0.5):.1f}",
                HEIGHT - 8,
                labels[index],
            )
        )
    return parts


def _reference_mark(*, top: float, reference: Reference | None) -> list[SafeString]:
    """The reference line across the plot, labelled, when it lies within the scale."""
    plot_h = HEIGHT - TOP - BOTTOM
    parts = []
    if reference is not None and 0 <= reference.value <= top:
        y = TOP + plot_h * (1 - reference.value / top)
        parts.append(
            format_html(
                '<line class="reference" x1="{}" x2="{}" y1="{}" y2="{}"><title>{}</title></line>'
                '<text class="reference-label" x="{}" y="{}" text-anchor="end">{}</text>',
                LEFT,
                WIDTH - RIGHT,
                f"{y:.1f}",
                f"{y:.1f}",
                reference.label,
                WIDTH - RIGHT - 2,
                f"{y - 4:.1f}",
                reference.label,
            )
        )
    return parts


def _svg(*, chart_id: str, title: str, parts: list[SafeString]) -> SafeString:
    return format_html(
        '<svg class="insights-chart" id="{}" viewBox="0 0 {} {}" role="img" '
        'aria-labelledby="{}-title"><title id="{}-title">{}</title>{}</svg>',
        chart_id,
        WIDTH,
        HEIGHT,
        chart_id,
        chart_id,
        title,
        mark_safe("".join(parts)),
    )


def bar_chart_svg(
    *,
    chart_id: str,
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    fmt: Format = number,
    reference: Reference | None = None,
) -> SafeString:
    """Bars per label, the `series` stacked in order from the bottom; each segment's `<title>`
    reads "label · series: value"."""
    totals = [sum(s.values[i] or 0 for s in series) for i in range(len(labels))]
    top = nice_ceiling(max([*totals, reference.value if reference else 0]))
    plot_h = HEIGHT - TOP - BOTTOM
    slot = (WIDTH - LEFT - RIGHT) / max(1, len(labels))
    width = max(1.0, slot * 0.72)
    parts = _frame(labels=labels, top=top, fmt=fmt)
    for index, label in enumerate(labels):
        base = 0.0
        for item in series:
            value = item.values[index] or 0
            if value <= 0:
                continue
            height = plot_h * value / top
            y = TOP + plot_h * (1 - (base + value) / top)
            parts.append(
                format_html(
                    '<rect class="{}" x="{}" y="{}" width="{}" height="{}">'
                    "<title>{} · {}: {}</title></rect>",
                    item.css,
                    f"{LEFT + slot * index + (slot - width) / 2:.1f}",
                    f"{y:.1f}",
                    f"{width:.1f}",
                    f"{height:.1f}",
                    label,
                    item.name,
                    fmt(value),
                )
            )
            base += value
    parts += _reference_mark(top=top, reference=reference)
    return _svg(chart_id=chart_id, title=title, parts=parts)


def line_chart_svg(
    *,
    chart_id: str,
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    fmt: Format = number,
    reference: Reference | None = None,
    top: float | None = None,
) -> SafeString:
    """A line per series through its values (a gap where a value is None), a dot with a
    `<title>` on each value; `top` fixes the scale (else the smallest nice value above every
    value and the reference)."""
    values = [v for s in series for v in s.values if v is not None]
    if top is None:
        top = nice_ceiling(max([*values, reference.value if reference else 0, 0]))
    plot_h = HEIGHT - TOP - BOTTOM
    slot = (WIDTH - LEFT - RIGHT) / max(1, len(labels))
    parts = _frame(labels=labels, top=top, fmt=fmt) + _reference_mark(top=top, reference=reference)
    for item in series:
        runs: list[list[tuple[float, float]]] = [[]]
        dots = []
        for index, value in enumerate(item.values):
            if value is None:
                runs.append([])
                continue
            x = LEFT + slot * (index + 0.5)
            y = TOP + plot_h * (1 - min(value, top) / top)
            runs[-1].append((x, y))
            dots.append(
                format_html(
                    '<circle class="{}" cx="{}" cy="{}" r="3.5">'
                    "<title>{} · {}: {}</title></circle>",
                    item.css,
                    f"{x:.1f}",
                    f"{y:.1f}",
                    labels[index],
                    item.name,
                    fmt(value),
                )
            )
        for run in runs:
            if len(run) > 1:
                parts.append(
                    format_html(
                        '<polyline class="line {}" points="{}"/>',
                        item.css,
                        " ".join(f"{x:.1f},{y:.1f}" for x, y in run),
                    )
                )
        parts += dots
    return _svg(chart_id=chart_id, title=title, parts=parts)


def legend_html(series: Sequence[Series], reference: Reference | None = None) -> SafeString:
    """The chart's key: a swatch and the name of each series (and the reference line)."""
    items = format_html_join(
        "",
        '<li><span class="swatch {}" aria-hidden="true"></span>{}</li>',
        ((s.css, s.name) for s in series),
    )
    if reference is not None:
        items = format_html(
            '{}<li><span class="swatch reference" aria-hidden="true"></span>{}</li>',
            items,
            reference.label,
        )
    return format_html('<ul class="insights-legend">{}</ul>', items)
