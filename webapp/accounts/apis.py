"""Account API: tokens (hashed, expiring, revocable by their user) and per-user secrets."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import authenticate
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
from webapp.accounts.tokens import TokenLimitReached, token_limit_error, user_token_create
from webapp.core.paging import PAGE_PARAMETERS, list_or_page, list_or_page_schema
from webapp.core.users import signed_in_user


class TokenIn(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False, style={"input_type": "password"})


class TokenOut(serializers.Serializer):
    token = serializers.CharField()
    expiry = serializers.DateTimeField(allow_null=True)


class TokenInfoOut(serializers.Serializer):
    token_key = serializers.CharField(help_text="The token's first characters: enough to tell tokens apart.")
    name = serializers.SerializerMethodField(help_text="The name given when it was made; empty for a sign-in token.")
    created = serializers.DateTimeField()
    expiry = serializers.DateTimeField(allow_null=True)

    def get_name(self, token: AuthToken) -> str:
        label = getattr(token, "label", None)
        return label.name if label is not None else ""


class NamedTokenIn(serializers.Serializer):
    name = serializers.CharField(max_length=200, help_text="What the token is for, e.g. 'laptop'.")


class NamedTokenOut(serializers.Serializer):
    token = serializers.CharField(help_text="The token: shown in this answer only.")
    token_key = serializers.CharField()
    name = serializers.CharField()
    expiry = serializers.DateTimeField(allow_null=True)


class SecretOut(serializers.Serializer):
    name = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # DRF's metaclass takes declared fields off the class: no clash with Field.label
    is_set = serializers.BooleanField()
    last4 = serializers.CharField(help_text="The last 4 characters, to tell keys apart; never the key.")


class SecretIn(serializers.Serializer):
    value = serializers.CharField(max_length=512, trim_whitespace=True)


def _secret_out(status_: object) -> dict[str, object]:
    return SecretOut(status_).data


class TokenCreateApi(APIView):
    """Sign in with a username and password for a token. Locked out after repeated failures."""

    authentication_classes = ()
    permission_classes = (AllowAny,)
    throttle_scope = "login"

    @extend_schema(request=TokenIn, responses={200: TokenOut})
    def post(self, request: Request) -> Response:
        data = TokenIn(data=request.data)
        data.is_valid(raise_exception=True)
        # django-axes counts the failure and refuses a locked-out pair (it needs the request).
        user = authenticate(request._request, **data.validated_data)  # noqa: SLF001 - DRF's wrapped Django request, which django-axes needs
        if user is None or not user.is_active:
            raise ValidationError({"non_field_errors": ["Unable to log in with provided credentials."]})
        refused = token_limit_error(user=user)  # knox checks its limit in its own LoginView only (review N7)
        if refused:
            raise PermissionDenied(refused)
        instance, token = AuthToken.objects.create(user=user, expiry=knox_settings.TOKEN_TTL)
        return Response(TokenOut({"token": token, "expiry": instance.expiry}).data)


class TokenListApi(APIView):
    """The caller's tokens (`GET`), and a new named one for scripts (`POST {name}`: the token is
    in this answer only, as the account page's "Create token" shows it once)."""

    def get_throttles(self) -> list[Any]:
        # Making a token is throttled as signing in is; listing is not.
        self.throttle_scope = "login" if self.request.method == "POST" else None
        return super().get_throttles()

    @extend_schema(
        operation_id="auth_tokens_list", parameters=PAGE_PARAMETERS,
        responses=list_or_page_schema(TokenInfoOut, "TokenInfo"),
    )
    def get(self, request: Request) -> Response:
        tokens = AuthToken.objects.filter(user=request.user).select_related("label").order_by("-created")
        return list_or_page(request, tokens, lambda rows: TokenInfoOut(rows, many=True).data)

    @extend_schema(request=NamedTokenIn, responses={201: NamedTokenOut})
    def post(self, request: Request) -> Response:
        data = NamedTokenIn(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            token, expiry, key = user_token_create(user=signed_in_user(request), name=data.validated_data["name"])
        except TokenLimitReached as exc:
            raise PermissionDenied(str(exc)) from None
        body = {"token": token, "expiry": expiry, "token_key": key, "name": data.validated_data["name"].strip()}
        return Response(NamedTokenOut(body).data, status=status.HTTP_201_CREATED)


class TokenRevokeApi(APIView):
    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, token_key: str) -> Response:
        deleted, _ = AuthToken.objects.filter(user=request.user, token_key=token_key).delete()
        if not deleted:
            raise NotFound("no token of yours starts with that key")
        return Response(status=status.HTTP_204_NO_CONTENT)


class SecretListApi(APIView):
    @extend_schema(
        operation_id="account_secrets_list", parameters=PAGE_PARAMETERS,
        responses=list_or_page_schema(SecretOut, "Secret"),
    )
    def get(self, request: Request) -> Response:
        return list_or_page(
            request, list(user_secrets_status(user=signed_in_user(request))), lambda rows: SecretOut(rows, many=True).data
        )


def _known(name: str) -> str:
    if name not in UserSecret.Name.values:
        raise NotFound(f"no secret named '{name[:40]}'; there are {', '.join(UserSecret.Name.values)}")
    return name


class SecretDetailApi(APIView):
    @extend_schema(responses=SecretOut)
    def get(self, request: Request, name: str) -> Response:
        return Response(_secret_out(user_secret_status(user=signed_in_user(request), name=_known(name))))

    @extend_schema(request=SecretIn, responses=SecretOut)
    def put(self, request: Request, name: str) -> Response:
        _known(name)
        data = SecretIn(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            stored = user_secret_set(user=signed_in_user(request), name=name, value=data.validated_data["value"])
        except SecretRejected as exc:
            raise ValidationError({"value": [str(exc)]}) from None
        return Response(_secret_out(stored))

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, name: str) -> Response:
        user_secret_delete(user=signed_in_user(request), name=_known(name))
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
