from django.urls import path

from webapp.catalog.routing import websocket_urlpatterns as catalog_websocket_urlpatterns
from webapp.runs.telemetry.consumers import RunConsumer

websocket_urlpatterns = [
    path("ws/runs/<int:run_id>/", RunConsumer.as_asgi()),  # type: ignore[arg-type]  # Channels routes consumers with path(), whose stub takes views only
    *catalog_websocket_urlpatterns,
]
