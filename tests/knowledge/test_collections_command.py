"""`manage.py collection create|list|grant|revoke`, and what readers read after each."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError

from knowledge.access import documents_readable
from knowledge.collections import collection_default
from knowledge.models import Collection, Document

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("collection", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def hr_group():
    return Group.objects.create(name="HR")


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user(username="alice", is_staff=True)


def test_create_without_readers_makes_a_collection_all_staff_read():
    out = run("create", "Handbooks", "--description", "Staff handbooks")

    collection = Collection.objects.get(name="Handbooks")
    assert collection.all_staff and collection.description == "Staff handbooks"
    assert "readable by all staff" in out


def test_create_with_groups_and_users_restricts_it_to_them(hr_group, alice, django_user_model):
    django_user_model.objects.create_user(username="bob", is_staff=True)

    out = run("create", "HR only", "--group", "HR", "--user", "alice", "--user", "bob")

    collection = Collection.objects.get(name="HR only")
    assert not collection.all_staff
    assert list(collection.reader_groups.all()) == [hr_group]
    assert {u.username for u in collection.reader_users.all()} == {"alice", "bob"}
    assert "group HR, user alice, user bob" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("create", "HR only", "--group", "Nobody"), "No group is named “Nobody”"),
        (("create", "HR only", "--user", "nobody"), "No user is named “nobody”"),
        (("create", "General"), "already exists"),
        (("create", "general"), "already exists"),
        (("create", "   "), "needs a name"),
        (("grant", "Missing", "--group", "HR"), "No collection is named “Missing”"),
        (("grant", "General", "--group", "Nobody"), "No group is named “Nobody”"),
        (("revoke", "General", "--user", "nobody"), "No user is named “nobody”"),
        (("revoke", "General", "--group", "HR"), "is not a reader"),
    ],
)
def test_bad_input_is_a_command_error_that_changes_nothing(hr_group, args, message):
    collection_default()
    before = list(Collection.objects.values_list("name", flat=True))

    with pytest.raises(CommandError, match=message):
        run(*args)

    assert list(Collection.objects.values_list("name", flat=True)) == before


@pytest.mark.parametrize("args", [("grant", "General"), ("grant", "General", "--group", "HR",
                                  "--user", "alice")])  # fmt: skip
def test_grant_and_revoke_take_exactly_one_group_or_user(hr_group, alice, args):
    collection_default()
    with pytest.raises(CommandError):
        run(*args)


def test_grant_and_revoke_change_what_the_reader_reads_on_the_next_call(alice, hr_group):
    run("create", "HR only", "--group", "HR")
    document = Document.objects.create(title="Pay bands", source="pay.md", status="ready")
    document.collection = Collection.objects.get(name="HR only")
    document.save()
    assert not documents_readable(user=alice).filter(pk=document.pk).exists()

    out = run("grant", "HR only", "--user", "alice")
    assert "group HR, user alice" in out
    assert documents_readable(user=alice).filter(pk=document.pk).exists()

    run("revoke", "HR only", "--user", "alice")
    assert not documents_readable(user=alice).filter(pk=document.pk).exists()

    run("grant", "HR only", "--group", "HR")  # already a reader: nothing changes
    alice.groups.add(hr_group)
    assert documents_readable(user=alice).filter(pk=document.pk).exists()
    run("revoke", "hr only", "--group", "HR")  # names are matched ignoring case
    assert not documents_readable(user=alice).filter(pk=document.pk).exists()


def test_list_shows_each_collection_with_its_documents_and_readers(hr_group):
    Document.objects.create(title="Handbook", source="handbook.md")
    run("create", "HR only", "--group", "HR")

    out = run("list")

    assert "General (default): 1 document(s), readable by all staff" in out
    assert "HR only: 0 document(s), readable by group HR" in out
