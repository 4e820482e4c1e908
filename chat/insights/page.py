"""What the insights page shows for one viewer and period: the figures (`selectors`) and their
charts (`charts`), put together for the template."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.utils.safestring import SafeString

from chat.insights import charts
from chat.insights.period import Period
from chat.insights.selectors import (
    REFUSAL_TARGET,
    DocumentFigures,
    ExchangeFigures,
    Figures,
    UnansweredTop,
    documents_cited,
    exchanges_figures,
    exchanges_totals,
    unanswered_top,
)
from knowledge.access import reader_for, user_is_staff

PERMISSION = "chat.view_insights"


def insights_allowed(user: AbstractBaseUser | AnonymousUser) -> bool:
    """Whether `user` may see the insights and export the exchanges: active staff who are
    superusers or hold `chat.view_insights` (directly or through a group)."""
    return user_is_staff(user) and (user.is_superuser or user.has_perm(PERMISSION))


@dataclass(frozen=True)
class Chart:
    title: str
    svg: SafeString
    legend: SafeString


@dataclass(frozen=True)
class BucketRow:
    label: str
    day: date
    figures: Figures


@dataclass(frozen=True)
class InsightsPage:
    period: Period
    figures: ExchangeFigures
    previous: Figures
    rows: list[BucketRow]
    charts: list[Chart]
    documents: DocumentFigures
    unanswered: list[UnansweredTop]
    refusal_target: float = REFUSAL_TARGET

    @property
    def above_target(self) -> bool:
        rate = self.figures.total.refusal_rate
        return rate is not None and rate > self.refusal_target


def bucket_label(day: date, period: Period) -> str:
    """A day as "03 Nov"; a week as the same for its Monday."""
    return day.strftime("%d %b")


def _charts(period: Period, rows: list[BucketRow]) -> list[Chart]:
    labels = [row.label for row in rows]
    figures = [row.figures for row in rows]
    each = "day" if period.by == "day" else "week"
    target = charts.Reference(REFUSAL_TARGET, f"{REFUSAL_TARGET:.0%} target")

    def chart(chart_id: str, title: str, series: list[charts.Series], **options) -> Chart:
        kind = options.pop("kind", "bar")
        draw = charts.bar_chart_svg if kind == "bar" else charts.line_chart_svg
        svg = draw(chart_id=chart_id, title=title, labels=labels, series=series, **options)
        return Chart(
            title=title,
            svg=svg,
            legend=charts.legend_html(series, options.get("reference")),
        )

    return [
        chart(
            "chart-questions",
            f"Questions per {each}",
            [
                charts.Series("Answered", "series-answered", [f.answered for f in figures]),
                charts.Series("Refused", "series-refused", [f.refused for f in figures]),
                charts.Series("Other", "series-other", [f.other for f in figures]),
            ],
        ),
        chart(
            "chart-refusals",
            f"Refusal rate per {each}",
            [charts.Series("Refusal rate", "series-refused", [f.refusal_rate for f in figures])],
            kind="line",
            fmt=charts.percent,
            reference=target,
            top=min(1.0, charts.nice_ceiling(max([0.25, *(f.refusal_rate or 0 for f in figures)]))),
        ),
        chart(
            "chart-latency",
            "Time to the first answer event",
            [
                charts.Series("p50", "series-p50", [f.first_event_p50_ms for f in figures]),
                charts.Series("p95", "series-p95", [f.first_event_p95_ms for f in figures]),
            ],
            kind="line",
            fmt=charts.milliseconds,
        ),
        chart(
            "chart-users",
            f"Active users per {each}",
            [charts.Series("Active users", "series-users", [f.users for f in figures])],
        ),
        chart(
            "chart-feedback",
            f"Ratings per {each}",
            [
                charts.Series("Thumbs up", "series-up", [f.thumbs_up for f in figures]),
                charts.Series("Thumbs down", "series-down", [f.thumbs_down for f in figures]),
            ],
        ),
    ]


def insights_page(*, period: Period, user: AbstractBaseUser) -> InsightsPage:
    """Every figure of `period` as `user` may see them (the caller has checked
    `insights_allowed`): seven statements, whatever the number of exchanges."""
    reader = reader_for(user)
    figures = exchanges_figures(period=period)
    rows = [
        BucketRow(label=bucket_label(day, period), day=day, figures=bucket)
        for day, bucket in figures.by_bucket
    ]
    return InsightsPage(
        period=period,
        figures=figures,
        previous=exchanges_totals(period=period.previous()),
        rows=rows,
        charts=_charts(period, rows),
        documents=documents_cited(period=period, user=reader),
        unanswered=unanswered_top(period=period, user=user),
    )
