"""Create or update a user of the test provider, with exactly the given groups."""

from __future__ import annotations

from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create or update a provider user; --groups sets its groups exactly."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--password", required=True)
        parser.add_argument("--email", default="")
        parser.add_argument("--first-name", default="")
        parser.add_argument("--last-name", default="")
        parser.add_argument("--groups", default="", help="comma-separated group names")

    def handle(self, *args, username, password, email, first_name, last_name, groups, **o):
        user = User.objects.filter(username=username).first() or User(username=username)
        user.email, user.first_name, user.last_name = email, first_name, last_name
        user.set_password(password)
        user.save()
        names = [name for name in groups.split(",") if name]
        user.groups.set([Group.objects.get_or_create(name=name)[0] for name in names])
