"""The insights (chat/insights/): each figure checked against exchanges with known counts
(tests/support/insights.py), per day, per week and over the whole period; who may see the page
and what names it shows them; the period's validation."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.test import Client
from django.urls import reverse

from chat.insights.period import Period, PeriodError, period_parse
from chat.insights.selectors import (
    documents_cited,
    exchanges_figures,
    exchanges_totals,
    unanswered_top,
)
from tests.support.insights import (
    CAR_PARK,
    MONDAY,
    NEXT_MONDAY,
    PAY_BANDS,
    PRIVATE_QUESTION,
    TUESDAY,
    insights_scenario,
)

pytestmark = pytest.mark.django_db

DAILY = Period(first=MONDAY, last=NEXT_MONDAY, by="day")
WEEKLY = Period(first=MONDAY, last=NEXT_MONDAY, by="week")


@pytest.fixture
def scenario():
    return insights_scenario()


@pytest.fixture
def superuser():
    return get_user_model().objects.create_superuser(username="root", email="", password=None)


@pytest.fixture
def insights_viewer():
    """Staff holding only the insights permission, outside HR."""
    user = get_user_model().objects.create_user(username="viewer", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_insights"))
    return user


def _figures(figures) -> tuple:
    return (
        figures.exchanges,
        figures.answered,
        figures.refused,
        figures.other,
        figures.users,
        figures.first_event_p50_ms,
        figures.first_event_p95_ms,
        figures.thumbs_up,
        figures.thumbs_down,
    )


# --- The figures ----------------------------------------------------------------------------
def test_each_day_counts_its_exchanges_outcomes_users_latency_and_ratings(scenario):
    figures = exchanges_figures(period=DAILY)

    days = dict(figures.by_bucket)
    assert list(days) == [MONDAY + timedelta(days=n) for n in range(9)]  # empty days too
    # exchanges, answered, refused, other, users, p50, p95 (answered only), up, down
    assert _figures(days[MONDAY]) == (3, 2, 1, 0, 2, 150.0, 195.0, 2, 1)
    assert _figures(days[TUESDAY]) == (3, 1, 1, 1, 3, 400.0, 400.0, 0, 0)
    assert _figures(days[NEXT_MONDAY]) == (1, 0, 1, 0, 1, None, None, 0, 0)
    assert _figures(days[MONDAY + timedelta(days=4)]) == (0, 0, 0, 0, 0, None, None, 0, 0)
    assert days[MONDAY].refusal_rate == pytest.approx(1 / 3)
    assert days[MONDAY].thumbs_down_rate == pytest.approx(1 / 3)
    assert days[MONDAY + timedelta(days=4)].refusal_rate is None


def test_each_week_starts_on_monday_and_sums_its_days(scenario):
    weeks = exchanges_figures(period=WEEKLY).by_bucket

    assert [week for week, _ in weeks] == [MONDAY, date(2026, 3, 9)]
    assert _figures(weeks[0][1]) == (6, 3, 2, 1, 3, 200.0, 380.0, 2, 1)
    assert _figures(weeks[1][1]) == (1, 0, 1, 0, 1, None, None, 0, 0)


def test_the_period_totals_and_the_period_before(scenario):
    figures = exchanges_figures(period=DAILY)

    assert _figures(figures.total) == (7, 3, 3, 1, 3, 200.0, 380.0, 2, 1)
    assert figures.total.refusal_rate == pytest.approx(3 / 7)
    before = exchanges_totals(period=DAILY.previous())
    assert _figures(exchanges_totals(period=DAILY)) == _figures(figures.total)
    assert DAILY.previous() == Period(first=date(2026, 2, 21), last=date(2026, 3, 1), by="day")
    assert _figures(before) == (1, 1, 0, 0, 1, 1000.0, 1000.0, 0, 0)


def test_a_period_of_one_day_holds_only_that_day(scenario):
    figures = exchanges_figures(period=Period(first=TUESDAY, last=TUESDAY, by="day"))

    assert _figures(figures.total) == (3, 1, 1, 1, 3, 400.0, 400.0, 0, 0)
    assert [day for day, _ in figures.by_bucket] == [TUESDAY]


def test_each_answering_mode_has_its_figures(scenario):
    modes = dict(exchanges_figures(period=DAILY).by_mode)

    assert list(modes) == ["extractive", "generative"]  # most used first
    assert _figures(modes["extractive"]) == (6, 2, 3, 1, 3, 150.0, 195.0, 2, 1)
    assert _figures(modes["generative"]) == (1, 1, 0, 0, 1, 400.0, 400.0, 0, 0)


def test_the_most_cited_documents_and_collections(scenario, superuser):
    cited = documents_cited(period=DAILY, user=superuser)
    documents, collections = cited.documents, cited.collections

    assert [(d.name, d.answers, d.citations) for d in documents] == [
        ("Leave policy", 2, 2),
        ("Expenses guide", 1, 1),
        (PAY_BANDS, 1, 1),
    ]
    assert [(c.name, c.answers, c.citations) for c in collections] == [
        ("General", 2, 3),
        ("HR only (insights)", 1, 1),
    ]
    week_two = Period(first=NEXT_MONDAY, last=NEXT_MONDAY, by="day")
    assert documents_cited(period=week_two, user=superuser).documents == []
    assert documents_cited(period=week_two, user=superuser, top=1).collections == []
    assert len(documents_cited(period=DAILY, user=superuser, top=1).documents) == 1


def test_documents_no_answer_of_the_period_cited(scenario, superuser):
    not_cited = documents_cited(period=DAILY, user=superuser).not_cited
    assert (not_cited.count, [title for _, title in not_cited.shown]) == (1, ["Unused handbook"])

    quiet_day = Period(first=NEXT_MONDAY, last=NEXT_MONDAY, by="day")
    not_cited = documents_cited(period=quiet_day, user=superuser).not_cited
    # Available documents only: the disabled "Old memo" is never listed.
    assert [title for _, title in not_cited.shown] == [
        "Expenses guide",
        "Leave policy",
        PAY_BANDS,
        "Unused handbook",
    ]
    assert not_cited.count == 4
    limited = documents_cited(period=quiet_day, user=superuser, not_cited_shown=2).not_cited
    assert (limited.count, len(limited.shown)) == (4, 2)


def test_the_largest_groups_of_unanswered_questions(scenario, superuser):
    groups = unanswered_top(period=DAILY, user=superuser)

    # The private wording and the shared one differ only in case, spaces and "?": one group.
    assert [(group.count, len(group.wordings)) for group in groups] == [(2, 1), (1, 1)]
    assert groups[0].text in (PRIVATE_QUESTION, "how do I  expense a taxi ride home")
    assert groups[1].text == CAR_PARK
    assert (
        unanswered_top(period=Period(first=TUESDAY, last=TUESDAY, by="day"), user=superuser)[
            0
        ].count
        == 1
    )


def test_near_duplicate_refused_questions_are_one_group(scenario, superuser):
    from tests.support.insights import at, exchange_at

    conversation = scenario.users["carl"].conversations.first()
    exchange_at(
        conversation,
        when=at(NEXT_MONDAY, 10),
        question="Where's the car park for visitors?",
        status="refused",
    )

    groups = unanswered_top(period=DAILY, user=superuser)
    car_park = next(group for group in groups if CAR_PARK in dict(group.wordings))
    assert car_park.count == 2
    assert len(car_park.wordings) == 2


# --- Who sees what --------------------------------------------------------------------------
def test_names_come_only_from_documents_the_viewer_may_read(scenario, insights_viewer):
    cited = documents_cited(period=DAILY, user=insights_viewer)
    documents, collections = cited.documents, cited.collections
    quiet_day = Period(first=NEXT_MONDAY, last=NEXT_MONDAY, by="day")
    not_cited = documents_cited(period=quiet_day, user=insights_viewer).not_cited

    assert [d.name for d in documents] == ["Leave policy", "Expenses guide"]
    assert [c.name for c in collections] == ["General"]
    assert not_cited.count == 3
    assert PAY_BANDS not in [title for _, title in not_cited.shown]

    client = Client()
    client.force_login(insights_viewer)
    for params in (
        {"from": "2026-03-02", "to": "2026-03-10"},
        {"from": "2026-03-10", "to": "2026-03-10"},
    ):
        body = client.get(reverse("insights:index"), params).content.decode()
        assert "Leave policy" in body
        assert PAY_BANDS not in body
        assert "HR only (insights)" not in body


def test_private_questions_of_others_stay_out_of_a_non_superusers_unanswered_groups(
    scenario, insights_viewer, superuser
):
    viewer_groups = unanswered_top(period=DAILY, user=insights_viewer)
    assert sorted((g.text, g.count) for g in viewer_groups) == [
        (CAR_PARK, 1),
        ("how do I  expense a taxi ride home", 1),
    ]
    client = Client()
    client.force_login(insights_viewer)
    body = client.get(reverse("insights:index"), {"from": "2026-03-02", "to": "2026-03-10"})
    assert PRIVATE_QUESTION not in body.content.decode()

    client.force_login(superuser)
    body = client.get(reverse("insights:index"), {"from": "2026-03-02", "to": "2026-03-10"})
    assert body.status_code == 200


@pytest.mark.parametrize("name", ["insights:index", "insights:export"])
def test_who_may_open_the_insights(scenario, superuser, insights_viewer, name):
    users = get_user_model().objects
    plain_staff = users.create_user(username="plain", is_staff=True)
    by_group = users.create_user(username="grouped", is_staff=True)
    analysts = Group.objects.create(name="Analysts")
    analysts.permissions.add(Permission.objects.get(codename="view_insights"))
    by_group.groups.add(analysts)
    not_staff = users.create_user(username="outsider")
    not_staff.user_permissions.add(Permission.objects.get(codename="view_insights"))
    url = reverse(name)

    for user, expected in [
        (superuser, 200),
        (insights_viewer, 200),
        (by_group, 200),
        (plain_staff, 403),
    ]:
        client = Client()
        client.force_login(user)
        assert client.get(url).status_code == expected, user.username
    anonymous = Client().get(url)
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith(reverse("admin:login"))
    client = Client()
    client.force_login(not_staff)
    assert client.get(url).status_code == 302  # the admin's login: staff only


def test_the_admin_index_links_the_insights_for_those_allowed(scenario, insights_viewer):
    plain = get_user_model().objects.create_user(username="plain", is_staff=True)
    plain.user_permissions.add(Permission.objects.get(codename="view_message"))
    client = Client()
    client.force_login(insights_viewer)
    assert reverse("insights:index") in client.get(reverse("admin:index")).content.decode()
    client.force_login(plain)
    assert reverse("insights:index") not in client.get(reverse("admin:index")).content.decode()


# --- The page -------------------------------------------------------------------------------
def test_the_page_shows_the_figures_charts_and_tables(scenario, superuser):
    client = Client()
    client.force_login(superuser)

    response = client.get(reverse("insights:index"), {"from": "2026-03-02", "to": "2026-03-10"})

    assert response.status_code == 200
    page = response.context["page"]
    assert page.figures.total.exchanges == 7
    assert page.previous.exchanges == 1
    assert page.above_target  # 3 of 7 refused
    body = response.content.decode()
    for chart_id in ("chart-questions", "chart-refusals", "chart-latency", "chart-users"):
        assert f'id="{chart_id}"' in body
    assert "20% target" in body  # the reference line
    assert "<title>02 Mar · Answered: 2</title>" in body  # a bar's hover text
    assert 'data-day="2026-03-03"' in body  # the table beside the charts
    assert "<script" not in body.split('id="content-main"')[1]  # nothing inline for the CSP
    assert "css/insights.css" in body


def test_the_page_per_week_by_default_for_long_periods(scenario, superuser):
    client = Client()
    client.force_login(superuser)

    response = client.get(reverse("insights:index"), {"days": "90"})

    assert response.context["page"].period.by == "week"
    assert response.context["page"].period.days == 90


def test_a_question_text_is_escaped_in_the_page(scenario, superuser):
    from tests.support.insights import at, exchange_at

    conversation = scenario.users["carl"].conversations.first()
    exchange_at(
        conversation,
        when=at(TUESDAY, 15),
        question="<script>alert(1)</script> taxi?",
        status="refused",
    )
    client = Client()
    client.force_login(superuser)
    body = client.get(
        reverse("insights:index"), {"from": "2026-03-02", "to": "2026-03-10"}
    ).content.decode()

    assert "<script>alert(1)</script>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt; taxi?" in body


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"from": "2026-03-02"}, "Give both"),
        ({"from": "2026-03-02", "to": "yesterday"}, "YYYY-MM-DD"),
        ({"from": "2026-03-10", "to": "2026-03-02"}, "must not be after"),
        ({"from": "2025-01-01", "to": "2026-03-02"}, "at most 366 days"),
        ({"days": "12"}, "must be one of 7, 30, 90"),
        ({"days": "7", "by": "month"}, "“by” must be"),
    ],
)
def test_a_period_that_cannot_be_shown_is_a_clear_400(superuser, params, message):
    client = Client()
    client.force_login(superuser)

    response = client.get(reverse("insights:index"), params)
    export = client.get(reverse("insights:export"), params)

    assert response.status_code == 400
    assert message in response.content.decode()
    assert export.status_code == 400
    assert message in export.content.decode()


def test_the_period_asked_for():
    today = date(2026, 3, 10)

    assert period_parse({}, today=today) == Period(date(2026, 2, 9), today, "day")
    assert period_parse({"days": "7"}, today=today) == Period(date(2026, 3, 4), today, "day")
    assert period_parse({"days": "90"}, today=today).by == "week"
    assert period_parse({"days": "90", "by": "day"}, today=today).by == "day"
    assert period_parse({"from": "2026-03-01", "to": "2026-03-01"}, today=today).days == 1
    with pytest.raises(PeriodError):
        period_parse({"to": "2026-03-01"}, today=today)
