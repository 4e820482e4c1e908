"""Sign-in's state changes: the user and groups a provider's claims make, and API tokens."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from accounts.models import ApiToken, OidcIdentity, Preferences

USERNAME_MAX = 150
# A personal token's key starts with this, so that its lookup knows its table.
API_KEY_PREFIX = "src_"


class AccessRefused(Exception):
    """The provider signed the person in, but Sourced's settings do not let them use it."""


@dataclass(frozen=True)
class OidcPolicy:
    """What the settings say about provider accounts: the claim holding the groups, the
    groups whose members may use Sourced (empty: everyone) and those made superusers."""

    groups_claim: str
    staff_groups: frozenset[str]
    admin_groups: frozenset[str]
    group_prefix: str = ""

    @classmethod
    def from_settings(cls) -> OidcPolicy:
        return cls(
            groups_claim=settings.OIDC_GROUPS_CLAIM,
            staff_groups=frozenset(settings.OIDC_STAFF_GROUPS),
            admin_groups=frozenset(settings.OIDC_ADMIN_GROUPS),
            group_prefix=settings.OIDC_GROUP_PREFIX,
        )


def provider_group_name(name: str, *, prefix: str) -> str:
    """The Sourced group a provider group `name` joins: `prefix` + `name` (at most 150
    characters, Django's limit), so that a provider group never joins a group made in Sourced
    by having its name (docs/decisions/0141-side-doors-closed.md)."""
    return (prefix + name)[:150]


def claims_groups(claims: dict, *, claim: str) -> list[str]:
    """The group names in `claims[claim]` (a list, or one string), stripped, deduplicated,
    in order."""
    value = claims.get(claim) or []
    if isinstance(value, str):
        value = [value]
    names: list[str] = []
    for item in value:
        name = str(item).strip()[:150]
        if name and name not in names:
            names.append(name)
    return names


@transaction.atomic
def oidc_user_sync(*, issuer: str, claims: dict, policy: OidcPolicy) -> AbstractBaseUser:
    """The Django user of the provider account `claims["sub"]` at `issuer`, created at its
    first sign-in, with name, email, staff and superuser status and the provider's groups
    brought up to date from `claims` (ID token and userinfo, already checked).

    Each group named in the claim joins the Sourced group of its name under
    OIDC_GROUP_PREFIX (`provider_group_name`), created as needed; groups the provider gave
    before and no longer names are left; other groups are not touched. Superuser status
    follows OIDC_ADMIN_GROUPS when that is set.

    Raises AccessRefused when OIDC_STAFF_GROUPS is set and the account is in none of them
    (nothing is created or changed then), or when the Django user was deactivated.
    """
    subject = str(claims["sub"])
    groups = claims_groups(claims, claim=policy.groups_claim)
    is_admin = bool(policy.admin_groups & set(groups))
    if policy.staff_groups and not (policy.staff_groups & set(groups)) and not is_admin:
        raise AccessRefused("not in the staff groups")

    identity = (
        OidcIdentity.objects.select_for_update()
        .select_related("user")
        .filter(issuer=issuer, subject=subject)
        .first()
    )
    user_model = get_user_model()
    if identity is None:
        user = user_model(username=_username_free(claims, subject=subject))
        user.set_unusable_password()
        user.save()
        identity = OidcIdentity.objects.create(user=user, issuer=issuer, subject=subject)
    else:
        user = identity.user
        if not user.is_active:
            raise AccessRefused("account deactivated in Sourced")

    user.first_name = str(claims.get("given_name") or "")[:150]
    user.last_name = str(claims.get("family_name") or "")[:150]
    if not (user.first_name or user.last_name) and claims.get("name"):
        user.first_name = str(claims["name"])[:150]
    user.email = str(claims.get("email") or "")[:254]
    user.is_staff = True
    if policy.admin_groups:
        user.is_superuser = is_admin
    user.last_login = timezone.now()
    user.save()

    wanted = {}
    for name in groups:
        joined = provider_group_name(name, prefix=policy.group_prefix)
        wanted.setdefault(joined, _group(joined))
    removed = set(identity.provider_groups) - set(wanted)
    if removed:
        user.groups.remove(*Group.objects.filter(name__in=removed))
    if wanted:
        user.groups.add(*wanted.values())
    identity.provider_groups = list(wanted)  # the Sourced groups' names, prefix included
    identity.last_sign_in = timezone.now()
    identity.save(update_fields=["provider_groups", "last_sign_in"])
    return user


def _group(name: str) -> Group:
    group, _ = Group.objects.get_or_create(name=name)
    return group


def _username_free(claims: dict, *, subject: str) -> str:
    """A username no one has: `preferred_username`, else the email, else the subject;
    "-2", "-3", … appended when it is taken."""
    base = str(claims.get("preferred_username") or claims.get("email") or subject)
    base = re.sub(r"[^\w.@+-]", "", base)[: USERNAME_MAX - 8] or "user"
    user_model = get_user_model()
    candidate, n = base, 1
    while user_model.objects.filter(username__iexact=candidate).exists():
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def api_key_hash(key: str) -> str:
    """The stored form of an API token's key."""
    return hashlib.sha256(key.encode()).hexdigest()


def api_token_create(*, user: AbstractBaseUser, name: str) -> tuple[ApiToken, str]:
    """A new API token of `user`, expiring API_TOKEN_TTL days from now; the token and its
    key (shown once: only its hash is stored)."""
    key = API_KEY_PREFIX + secrets.token_hex(20)
    token = ApiToken.objects.create(
        user=user,
        name=name.strip()[:100] or "API token",
        key_hash=api_key_hash(key),
        key_prefix=key[:8],
        expires=timezone.now() + timedelta(days=settings.API_TOKEN_TTL),
    )
    return token, key


def api_token_revoke(*, user: AbstractBaseUser, token_id: int) -> bool:
    """Delete `user`'s token `token_id`; False when `user` has no such token."""
    deleted, _ = ApiToken.objects.filter(user=user, pk=token_id).delete()
    return bool(deleted)


def preferences_update(*, user: AbstractBaseUser, show_citations: bool) -> Preferences:
    """Store the user's display preferences (one row per user, created on first change)."""
    preferences, _ = Preferences.objects.update_or_create(
        user=user, defaults={"show_citations": show_citations}
    )
    return preferences
