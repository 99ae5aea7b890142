"""WebSocket routes of the catalog: the environment console."""

from django.urls import path

from webapp.catalog.consumers import EnvironmentConsoleConsumer

websocket_urlpatterns = [
    path("ws/environments/<int:environment_id>/console/", EnvironmentConsoleConsumer.as_asgi()),  # type: ignore[arg-type]  # Channels routes consumers with path(), whose stub takes views only
]
