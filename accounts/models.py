"""Who signed in through the identity provider, and the API tokens users make for themselves."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class OidcIdentity(models.Model):
    """The provider's account (issuer + `sub`) a Django user signs in as, and the groups the
    provider gave it at its last sign-in, by their Sourced names (OIDC_GROUP_PREFIX included:
    the ones sign-in may take away again)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identity"
    )
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    provider_groups = models.JSONField(default=list, blank=True)
    last_sign_in = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "identity at the provider"
        verbose_name_plural = "identities at the provider"
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="oidc_identity_unique")
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class ApiToken(models.Model):
    """A personal API token. Only the SHA-256 of its key is stored: the key is shown once,
    when it is created (accounts.services.api_token_create)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    key_hash = models.CharField(max_length=64, unique=True)
    key_prefix = models.CharField(max_length=8)
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField()

    class Meta:
        ordering = ["-created"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.key_prefix}…)"


class Preferences(models.Model):
    """A user's display preferences, kept on the server so that they follow the user from
    one browser to another (accounts.services.preferences_update). A user without a row has
    the defaults (accounts.selectors.preferences_of)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preferences"
    )
    show_citations = models.BooleanField(
        default=True, help_text="Show the numbered citation markers inside answers."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "preferences"

    def __str__(self) -> str:
        return f"Preferences of user {self.user_id}"
