"""The readers of a restricted collection, one of each kind the access matrix checks."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission


def readers_create(*, with_outsiders: bool = True) -> dict:
    """Users keyed by kind: "asker" and "reader by group" (both in the group "HR"), "reader by
    user" (to be named a reader by the caller), plain "staff", a "superuser", a "document
    manager" (`knowledge.view_document`), and with `with_outsiders` a "non-staff" user and
    "anonymous" (None). The group itself is under "hr"."""
    users = get_user_model().objects
    hr = Group.objects.create(name="HR")
    made = {
        "asker": users.create_user(username="asker", is_staff=True),
        "reader by group": users.create_user(username="hr2", is_staff=True),
        "reader by user": users.create_user(username="named", is_staff=True),
        "staff": users.create_user(username="staff", is_staff=True),
        "superuser": users.create_superuser(username="root", email="", password=None),
        "document manager": users.create_user(username="manager", is_staff=True),
    }
    if with_outsiders:
        made["non-staff"] = users.create_user(username="visitor")
        made["anonymous"] = None
    made["document manager"].user_permissions.add(Permission.objects.get(codename="view_document"))
    made["asker"].groups.add(hr)
    made["reader by group"].groups.add(hr)
    made["hr"] = hr
    return made
