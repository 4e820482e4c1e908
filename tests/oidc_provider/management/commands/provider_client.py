"""Register (or update) the relying party: a confidential authorization-code client, RS256."""

from __future__ import annotations

from django.core.management.base import BaseCommand
from oauth2_provider.models import get_application_model


class Command(BaseCommand):
    help = "Create or update the OpenID client the tests sign in with."

    def add_arguments(self, parser):
        parser.add_argument("--client-id", required=True)
        parser.add_argument("--client-secret", required=True)
        parser.add_argument("--redirect-uri", action="append", default=[])
        parser.add_argument("--post-logout-redirect-uri", action="append", default=[])

    def handle(self, *args, client_id, client_secret, redirect_uri, post_logout_redirect_uri, **o):
        model = get_application_model()
        application = model.objects.filter(client_id=client_id).first() or model(
            client_id=client_id
        )
        application.name = "Sourced"
        application.client_secret = client_secret
        application.client_type = model.CLIENT_CONFIDENTIAL
        application.authorization_grant_type = model.GRANT_AUTHORIZATION_CODE
        application.algorithm = model.RS256_ALGORITHM
        application.skip_authorization = True
        application.redirect_uris = " ".join(redirect_uri)
        application.post_logout_redirect_uris = " ".join(post_logout_redirect_uri)
        application.save()
