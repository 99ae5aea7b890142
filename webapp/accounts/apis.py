"""Account API: tokens (hashed, expiring, revocable by their user) and per-user secrets."""

from __future__ import annotations

from django.contrib.auth import authenticate
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from knox import views as knox_views
from knox.models import AuthToken
from knox.settings import knox_settings
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.accounts.models import UserSecret
from webapp.accounts.secrets import (
    SecretRejected,
    user_secret_delete,
    user_secret_set,
    user_secret_status,
    user_secrets_status,
)


class TokenIn(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False, style={"input_type": "password"})


class TokenOut(serializers.Serializer):
    token = serializers.CharField()
    expiry = serializers.DateTimeField(allow_null=True)


class TokenInfoOut(serializers.Serializer):
    token_key = serializers.CharField(help_text="The token's first characters: enough to tell tokens apart.")
    created = serializers.DateTimeField()
    expiry = serializers.DateTimeField(allow_null=True)


class SecretOut(serializers.Serializer):
    name = serializers.CharField()
    label = serializers.CharField()
    is_set = serializers.BooleanField()
    last4 = serializers.CharField(help_text="The last 4 characters, to tell keys apart; never the key.")


class SecretIn(serializers.Serializer):
    value = serializers.CharField(max_length=512, trim_whitespace=True)


def _secret_out(status_: object) -> dict[str, object]:
    return SecretOut(status_).data


class TokenCreateApi(APIView):
    """Sign in with a username and password for a token. Locked out after repeated failures."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    throttle_scope = "login"

    @extend_schema(request=TokenIn, responses={200: TokenOut})
    def post(self, request: Request) -> Response:
        data = TokenIn(data=request.data)
        data.is_valid(raise_exception=True)
        # django-axes counts the failure and refuses a locked-out pair (it needs the request).
        user = authenticate(request._request, **data.validated_data)
        if user is None or not user.is_active:
            raise ValidationError({"non_field_errors": ["Unable to log in with provided credentials."]})
        limit = knox_settings.TOKEN_LIMIT_PER_USER
        if limit is not None and AuthToken.objects.filter(user=user, expiry__gt=timezone.now()).count() >= limit:
            # Knox checks its limit in its own LoginView only (security review N7).
            raise PermissionDenied(
                f"you have {limit} API tokens, the most one account may hold: revoke one on the account "
                "page (or DELETE /api/auth/tokens/<key>/) first"
            )
        instance, token = AuthToken.objects.create(user=user, expiry=knox_settings.TOKEN_TTL)
        return Response(TokenOut({"token": token, "expiry": instance.expiry}).data)


class TokenListApi(APIView):
    @extend_schema(responses=TokenInfoOut(many=True))
    def get(self, request: Request) -> Response:
        tokens = AuthToken.objects.filter(user=request.user).order_by("-created")
        return Response(TokenInfoOut(tokens, many=True).data)


class TokenRevokeApi(APIView):
    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, token_key: str) -> Response:
        deleted, _ = AuthToken.objects.filter(user=request.user, token_key=token_key).delete()
        if not deleted:
            raise NotFound("no token of yours starts with that key")
        return Response(status=status.HTTP_204_NO_CONTENT)


class SecretListApi(APIView):
    @extend_schema(responses=SecretOut(many=True))
    def get(self, request: Request) -> Response:
        return Response(SecretOut(user_secrets_status(user=request.user), many=True).data)


def _known(name: str) -> str:
    if name not in UserSecret.Name.values:
        raise NotFound(f"no secret named '{name[:40]}'; there are {', '.join(UserSecret.Name.values)}")
    return name


class SecretDetailApi(APIView):
    @extend_schema(responses=SecretOut)
    def get(self, request: Request, name: str) -> Response:
        return Response(_secret_out(user_secret_status(user=request.user, name=_known(name))))

    @extend_schema(request=SecretIn, responses=SecretOut)
    def put(self, request: Request, name: str) -> Response:
        _known(name)
        data = SecretIn(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            stored = user_secret_set(user=request.user, name=name, value=data.validated_data["value"])
        except SecretRejected as exc:
            raise ValidationError({"value": [str(exc)]}) from None
        return Response(_secret_out(stored))

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, name: str) -> Response:
        user_secret_delete(user=request.user, name=_known(name))
        return Response(status=status.HTTP_204_NO_CONTENT)




class TokenLogoutApi(knox_views.LogoutView):
    """Revoke the token this request carries."""

    @extend_schema(request=None, responses={204: None})
    def post(self, request: Request, format: str | None = None) -> Response:
        return super().post(request, format)


class TokenLogoutAllApi(knox_views.LogoutAllView):
    """Revoke every token of the signed-in user."""

    @extend_schema(request=None, responses={204: None})
    def post(self, request: Request, format: str | None = None) -> Response:
        return super().post(request, format)
