"""ASGI entry point: HTTP through Django, WebSockets through Channels."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings.local")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from webapp.accounts.socket_auth import TokenSocketAuth  # noqa: E402
from webapp.core.bodylimit import BodySizeLimit  # noqa: E402
from webapp.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": BodySizeLimit(django_asgi_app, limit=settings.ENVLAB_MAX_REQUEST_BYTES),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(TokenSocketAuth(URLRouter(websocket_urlpatterns)))),  # type: ignore[arg-type]  # types-channels wants its check-only _ExtendedURLPattern, which path() never returns
    }
)
