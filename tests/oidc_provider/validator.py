"""The claims the test provider releases (names, email, the user's Django groups as `groups`)
and the ways the tests make it misbehave: a file (PROVIDER_MISCHIEF_FILE) holding one of
`expired`, `audience`, `nonce`, `forged` changes the next ID tokens it issues;
`groups-in-userinfo` leaves the groups out of the ID token (the userinfo response has them)."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.utils import timezone
from oauth2_provider.oauth2_validators import OAuth2Validator


def mischief() -> str:
    path = settings.PROVIDER_MISCHIEF_FILE
    if not path or not Path(path).exists():
        return ""
    return Path(path).read_text().strip()


class GroupsValidator(OAuth2Validator):
    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "profile"}

    def get_additional_claims(self, request):
        user = request.user
        return {
            "preferred_username": user.username,
            "email": user.email,
            "given_name": user.first_name,
            "family_name": user.last_name,
            "name": user.get_full_name(),
            "groups": sorted(user.groups.values_list("name", flat=True)),
        }

    def get_id_token_dictionary(self, token, token_handler, request):
        claims, expiration = super().get_id_token_dictionary(token, token_handler, request)
        if mischief() == "expired":
            claims["exp"] = int((timezone.now() - timedelta(hours=1)).timestamp())
        if mischief() == "groups-in-userinfo":  # as providers that keep ID tokens small do
            claims.pop("groups", None)
        return claims, expiration

    def finalize_id_token(self, id_token, token, token_handler, request):
        mode = mischief()
        if mode == "audience":
            # Issued to another application; `azp` naming this one must not make it pass.
            id_token["aud"] = "another-application"
            id_token["azp"] = request.client_id
        if mode == "nonce":
            id_token["nonce"] = "a-nonce-from-an-earlier-sign-in"
        signed = super().finalize_id_token(id_token, token, token_handler, request)
        if mode == "forged":
            # The claims changed after signing: the signature no longer matches them.
            header, payload, signature = signed.split(".")
            claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
            claims["groups"] = [*claims.get("groups", []), "sourced-admins"]
            payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
            signed = f"{header}.{payload}.{signature}"
        return signed
