from django.contrib import admin
from rest_framework.authtoken import admin as drf_token_admin  # registers TokenProxy
from rest_framework.authtoken.models import TokenProxy

from accounts.models import ApiToken, OidcIdentity

# DRF's token admin shows keys in clear and lets an administrator make one for anyone: tokens
# are made by their owner (/account/tokens/) or `manage.py api_token_create`, stored hashed.
if admin.site.is_registered(TokenProxy):
    admin.site.unregister(TokenProxy)
del drf_token_admin


@admin.register(OidcIdentity)
class OidcIdentityAdmin(admin.ModelAdmin):
    list_display = ["user", "subject", "issuer", "last_sign_in"]
    search_fields = ["user__username", "subject"]
    readonly_fields = ["user", "issuer", "subject", "provider_groups", "last_sign_in"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "key_prefix", "created", "expires"]
    search_fields = ["user__username", "name", "key_prefix"]
    readonly_fields = ["user", "key_hash", "key_prefix", "created"]

    def has_add_permission(self, request) -> bool:
        return False  # a key is shown once, to its owner: /account/tokens/ or api_token_create
