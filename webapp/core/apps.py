from django.apps import AppConfig


class CoreConfig(AppConfig):
    """The bottom layer: what every other app may use and nothing of theirs it may import."""

    name = "webapp.core"
    label = "core"
