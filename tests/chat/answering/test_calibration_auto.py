"""Per-knowledge-base calibration (chat/calibration.py): measured on the knowledge base itself,
stored with its fingerprint, recomputed by a background task when the knowledge base changes,
and shown on the Chat settings page next to the admin's threshold."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from chat.answering.features import generic_questions
from chat.calibration import (
    calibration_current,
    calibration_is_current,
    calibration_refresh,
    probe_questions,
)
from chat.models import ChatSettings, EvidenceCalibration
from knowledge.access import reader_of_all_staff
from knowledge.collections import collection_create
from knowledge.services import documents_set_enabled
from tests.support.knowledge_base import document_create

IMMEDIATE = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}


@pytest.mark.slow
def test_calibration_is_measured_stored_and_follows_the_knowledge_base(
    policies_kb, settings, django_capture_on_commit_callbacks
):
    row = calibration_refresh()

    assert row is not None and calibration_is_current(row)
    assert row.negatives == len(generic_questions())
    # Generic questions match a small policy corpus weakly, and never better than chance
    # cosines of this model allow.
    assert 0.0 < row.noise_floor < 0.6
    assert row.threshold <= row.noise_floor
    # Unchanged knowledge base: the stored row is returned, not measured again.
    assert calibration_refresh().computed_at == row.computed_at

    # Disabling a document changes the knowledge base: the task queued on commit measures it.
    settings.TASKS = IMMEDIATE
    with django_capture_on_commit_callbacks(execute=True):
        documents_set_enabled(ids=[policies_kb["security"].pk], enabled=False)
    again = calibration_current()
    assert again.fingerprint != row.fingerprint and calibration_is_current(again)


def test_probes_are_keyword_questions_from_the_knowledge_base_own_sentences(policies_kb):
    probes = probe_questions(reader=reader_of_all_staff())
    assert probes
    for probe in probes:
        words = probe.split()
        assert 3 <= len(words) <= 6
        assert not any(w.lower() in {"the", "and", "of", "to"} for w in words)


def test_an_empty_knowledge_base_has_no_calibration(db):
    assert calibration_refresh() is None
    assert calibration_current() is None


@pytest.mark.slow
def test_the_settings_page_shows_the_automatic_values_next_to_the_threshold(
    policies_kb, admin_client
):
    ChatSettings.objects.get_or_create(pk=1)
    # Not measured yet, whatever an earlier module left committed: a module-scoped knowledge
    # base (browser tests) is measured when it is made, and deleting its documents afterwards
    # outside a task leaves that row behind (found in a worker's database after the suite).
    EvidenceCalibration.objects.all().delete()
    url = reverse("admin:chat_chatsettings_change", args=[1])
    assert "Not measured yet" in admin_client.get(url).content.decode()

    row = calibration_refresh()
    page = admin_client.get(url).content.decode()
    assert f"Automatic threshold: <strong>{row.threshold:.3f}</strong>" in page
    assert f"{row.noise_floor:.3f}" in page
    assert page.index("Evidence threshold") < page.index("Automatic threshold")


@pytest.mark.slow
def test_a_restricted_collection_never_moves_the_calibration_everyone_is_checked_against(
    policies_kb,
):
    row = calibration_refresh()
    hr = collection_create(name="HR only", groups=[Group.objects.create(name="HR")])

    document_create(
        title="Pay bands",
        texts=["The salary band for a Grade 7 analyst is 41,200 to 48,900 pounds a year."] * 3,
        collection=hr,
    )

    assert calibration_is_current(row)  # the restricted document changed nothing it measures
    again = calibration_refresh(force=True)
    assert (again.noise_floor, again.probe_floor, again.threshold) == (
        row.noise_floor,
        row.probe_floor,
        row.threshold,
    )
    assert not any("Grade" in probe for probe in probe_questions(reader=reader_of_all_staff()))
