"""Sign in and out with Django's own auth views."""

from __future__ import annotations

from django.contrib.auth.views import LoginView, LogoutView


class EnvlabLoginView(LoginView):
    template_name = "registration/login.html"
    redirect_authenticated_user = True


class EnvlabLogoutView(LogoutView):
    """POST only (Django 5): the nav submits a small form, so no link can sign anyone out."""
