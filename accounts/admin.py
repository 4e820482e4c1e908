from django.contrib import admin

from accounts.models import ApiToken, OidcIdentity


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
