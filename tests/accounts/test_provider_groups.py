"""A provider group joins the Sourced group of its name under OIDC_GROUP_PREFIX, never a group
made in Sourced that happens to have its name; and the migration that moves groups joined by
bare name before this change."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.contrib.auth.models import Group, User
from django.test import Client

from accounts.models import OidcIdentity
from knowledge.access import documents_readable
from knowledge.collections import collection_create
from tests.accounts.test_oidc import PASSWORD, sign_in
from tests.support.knowledge_base import document_create

pytestmark = pytest.mark.django_db

migration = importlib.import_module("accounts.migrations.0003_provider_groups_prefixed")


def test_a_provider_group_named_like_a_sourced_group_does_not_join_it(provider, settings):
    settings.OIDC_GROUP_PREFIX = "idp:"
    local_hr = Group.objects.create(name="HR")
    hr_only = collection_create(name="HR only", groups=[local_hr])
    document_create(title="Pay bands 2026", texts=["Band C pays 61,000."], collection=hr_only)
    provider.user_set("nia", password=PASSWORD, groups=["HR"])
    assert sign_in(Client(), provider, "nia").status_code == 302

    nia = User.objects.get(username="nia")
    assert list(nia.groups.values_list("name", flat=True)) == ["idp:HR"]
    assert not local_hr.user_set.exists()
    assert not documents_readable(user=nia).filter(title="Pay bands 2026").exists()
    # An administrator who means it gives the provider's group the collection.
    hr_only.reader_groups.add(Group.objects.get(name="idp:HR"))
    assert documents_readable(user=nia).filter(title="Pay bands 2026").exists()


def test_the_prefix_is_a_setting(provider, settings):
    settings.OIDC_GROUP_PREFIX = "okta/"
    provider.user_set("oto", password=PASSWORD, groups=["finance"])
    sign_in(Client(), provider, "oto")
    assert list(User.objects.get(username="oto").groups.values_list("name", flat=True)) == [
        "okta/finance"
    ]
    assert OidcIdentity.objects.get(user__username="oto").provider_groups == ["okta/finance"]


def test_the_migration_renames_provider_made_groups_and_splits_joined_ones(
    settings, django_user_model
):
    settings.OIDC_GROUP_PREFIX = "idp:"
    local = django_user_model.objects.create_user(username="local", is_staff=True)
    ada = django_user_model.objects.create_user(username="ada", is_staff=True)
    OidcIdentity.objects.create(
        user=ada, issuer="https://idp", subject="1", provider_groups=["HR", "finance"]
    )
    hr = Group.objects.create(name="HR")  # made in Sourced, joined by name at sign-in
    hr.user_set.add(local, ada)
    finance = Group.objects.create(name="finance")  # made by sign-in
    finance.user_set.add(ada)
    ledgers = collection_create(name="Ledgers", groups=[finance])
    document_create(title="Ledger", texts=["Q3 closes on the 5th."], collection=ledgers)
    salaries = collection_create(name="Salaries", groups=[hr])
    document_create(title="Salaries", texts=["Band C pays 61,000."], collection=salaries)

    migration.provider_groups_prefix(apps, None)

    assert Group.objects.get(pk=finance.pk).name == "idp:finance"  # renamed, keeps Ledgers
    assert list(Group.objects.get(name="HR").user_set.all()) == [local]
    assert list(Group.objects.get(name="idp:HR").user_set.all()) == [ada]
    assert OidcIdentity.objects.get(user=ada).provider_groups == ["idp:HR", "idp:finance"]
    readable = set(documents_readable(user=ada).values_list("title", flat=True))
    assert readable >= {"Ledger"} and "Salaries" not in readable
    assert "Salaries" in set(documents_readable(user=local).values_list("title", flat=True))

    migration.provider_groups_prefix(apps, None)  # twice: nothing more changes
    assert OidcIdentity.objects.get(user=ada).provider_groups == ["idp:HR", "idp:finance"]
    assert not Group.objects.filter(name__startswith="idp:idp:").exists()
