"""Sign-in pages: the login page (password form and the provider's button), the provider's
round trip, logout, the lockout page, and each user's API tokens. Thin adapters over
accounts.oidc, accounts.services and accounts.selectors."""

from __future__ import annotations

import logging
import math
from datetime import timedelta

from axes.models import AccessAttempt
from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login, logout
from django.contrib.auth import views as auth_views
from django.db.models import Max
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from accounts import oidc
from accounts.addresses import client_address
from accounts.selectors import api_tokens_of
from accounts.services import (
    AccessRefused,
    OidcPolicy,
    api_token_create,
    api_token_revoke,
    oidc_user_sync,
    preferences_update,
)
from accounts.sessions import SESSION_ID_TOKEN, session_sign_in_record
from pages import sidebar_context, staff_required
from pages.client_input import client_int

log = logging.getLogger("accounts.oidc")

SESSION_NEXT = "oidc_next"


def provider_down_message() -> str:
    """What the login page says while the provider cannot be reached."""
    way_out = ", or sign in with your password" if settings.PASSWORD_LOGIN else ""
    return (
        "Your organisation's sign-in service cannot be reached right now: try again in a few "
        f"minutes{way_out}."
    )


def login_context() -> dict:
    """What the login page shows besides Django's form: the provider's button (and whether
    the provider can be reached), the form."""
    enabled = oidc.oidc_enabled()
    return {
        "oidc_enabled": enabled,
        "oidc_unreachable": enabled and not oidc.provider_reachable(),
        "provider_down_message": provider_down_message(),
        "oidc_label": settings.OIDC_LOGIN_LABEL,
        "password_login": settings.PASSWORD_LOGIN,
    }


class LoginView(auth_views.LoginView):
    """Django's login view, with the provider's button; with PASSWORD_LOGIN off, the form is
    hidden and a posted password refused."""

    redirect_authenticated_user = True

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), **login_context()}

    def post(self, request, *args, **kwargs):
        if not settings.PASSWORD_LOGIN:
            return self._page(request, error="Password sign-in is turned off.", status=403)
        return super().post(request, *args, **kwargs)

    def _page(self, request: HttpRequest, *, error: str, status: int) -> HttpResponse:
        self.request = request
        context = self.get_context_data(form=self.get_form_class()(request), sign_in_error=error)
        return self.render_to_response(context, status=status)


def _login_page_error(request: HttpRequest, error: str, *, status: int) -> HttpResponse:
    view = LoginView()
    view.setup(request)
    return view._page(request, error=error, status=status).render()


def _refusal(request: HttpRequest, *, heading: str, reason: str, status: int) -> HttpResponse:
    return render(
        request,
        "accounts/sign_in_refused.html",
        {"heading": heading, "reason": reason, **login_context()},
        status=status,
    )


@require_GET
def oidc_login(request: HttpRequest) -> HttpResponse:
    """Send the browser to the provider (state, nonce and PKCE in the session)."""
    if not oidc.oidc_enabled():
        return redirect("login")
    next_url = request.GET.get("next", "")
    if next_url and url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        request.session[SESSION_NEXT] = next_url
    try:
        return oidc.authorization_redirect(
            request, redirect_uri=request.build_absolute_uri(reverse("oidc_callback"))
        )
    except oidc.ProviderUnavailable as error:
        log.warning("oidc sign-in: the provider cannot be reached: %s", error)
        return _login_page_error(request, provider_down_message(), status=503)


@require_GET
def oidc_callback(request: HttpRequest) -> HttpResponse:
    """The provider's redirect back: check everything, make or update the user, sign in."""
    if not oidc.oidc_enabled():
        return redirect("login")
    try:
        claims, id_token = oidc.authorization_finish(request)
        user = oidc_user_sync(
            issuer=settings.OIDC_ISSUER, claims=claims, policy=OidcPolicy.from_settings()
        )
    except oidc.SignInRejected as error:
        log.warning("oidc sign-in refused from %s: %s", client_address(request) or "?", error)
        return _refusal(
            request,
            heading="Sign-in failed",
            reason="The answer from your organisation's sign-in service could not be trusted "
            "(it was expired, not meant for Sourced, already used, or not signed by the "
            "provider), so you are not signed in. Start again from the login page.",
            status=400,
        )
    except oidc.ProviderUnavailable as error:
        log.warning("oidc sign-in: the provider cannot be reached: %s", error)
        return _login_page_error(request, provider_down_message(), status=503)
    except AccessRefused as error:
        log.warning("oidc sign-in refused for sub=%s: %s", claims.get("sub"), error)
        return _refusal(
            request,
            heading="Your account may not use Sourced",
            reason="Your organisation signed you in, but your account is not in a group "
            "allowed to use Sourced. Ask your administrator for access.",
            status=403,
        )
    next_url = request.session.pop(SESSION_NEXT, "") or reverse(settings.LOGIN_REDIRECT_URL)
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    request.session[SESSION_ID_TOKEN] = id_token
    session_sign_in_record(request.session)
    return HttpResponseRedirect(next_url)


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    """End the session; after a provider sign-in, continue to the provider's end-session
    endpoint when it has one (RP-initiated logout)."""
    id_token = request.session.get(SESSION_ID_TOKEN)
    logout(request)
    if id_token is not None and oidc.oidc_enabled():
        url = oidc.logout_url(
            id_token=id_token,
            post_logout_redirect_uri=request.build_absolute_uri(reverse("login")),
        )
        if url:
            return HttpResponseRedirect(url)
    return redirect(settings.LOGOUT_REDIRECT_URL)


def lockout_response(request: HttpRequest, response=None, credentials=None) -> HttpResponse:
    """Axes' lockout: the login page (or the admin's) saying when to try again."""
    minutes = _lockout_minutes_left(request, credentials or {})
    error = (
        f"Too many failed sign-in attempts. Try again in {minutes} "
        f"minute{'s' if minutes != 1 else ''}."
    )
    if request.path.startswith(reverse("admin:login")):
        return render(
            request,
            "no_access.html",
            {"heading": "Too many attempts", "reason": error},
            status=settings.AXES_HTTP_RESPONSE_CODE,
        )
    return _login_page_error(request, error, status=settings.AXES_HTTP_RESPONSE_CODE)


def _lockout_minutes_left(request: HttpRequest, credentials: dict) -> int:
    username = credentials.get("username") or request.POST.get("username", "")
    address = getattr(request, "axes_ip_address", None) or client_address(request)
    latest = AccessAttempt.objects.filter(username=username, ip_address=address).aggregate(
        latest=Max("attempt_time")
    )["latest"]
    cool_off: timedelta = settings.AXES_COOLOFF_TIME
    if latest is None:
        return math.ceil(cool_off.total_seconds() / 60)
    left = latest + cool_off - timezone.now()
    return max(1, math.ceil(left.total_seconds() / 60))


@staff_required
def api_tokens(request: HttpRequest) -> HttpResponse:
    """The signed-in user's API tokens: list, create (the key shown once), revoke."""
    new_key = ""
    if request.method == "POST":
        if "revoke" in request.POST:
            try:
                token_id = client_int(request.POST["revoke"], minimum=1)
            except ValueError:
                token_id = 0
            if api_token_revoke(user=request.user, token_id=token_id):
                messages.success(request, "Token revoked.")
            return redirect("api_tokens")
        token, new_key = api_token_create(user=request.user, name=request.POST.get("name", ""))
    return render(
        request,
        "accounts/api_tokens.html",
        {
            "tokens": api_tokens_of(user=request.user),
            "new_key": new_key,
            "ttl_days": settings.API_TOKEN_TTL,
            "now": timezone.now(),
            "nav": "tokens",
            **sidebar_context(request.user),
        },
    )


class PreferencesForm(forms.Form):
    """The settings dialog's display options; an unticked checkbox is not sent: False."""

    show_citations = forms.BooleanField(required=False)


@staff_required
@require_POST
def preferences(request: HttpRequest) -> HttpResponse:
    """Store the signed-in user's display preferences (the settings dialog posts here when a
    toggle changes); 204 with nothing to swap."""
    form = PreferencesForm(request.POST)
    form.is_valid()  # always: a BooleanField reads any value, absent or empty as False
    preferences_update(user=request.user, show_citations=form.cleaned_data["show_citations"])
    return HttpResponse(status=204)
