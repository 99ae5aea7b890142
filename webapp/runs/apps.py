from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "webapp.runs"
    label = "runs"

    def ready(self) -> None:
        # The catalog sits below runs and announces an entry made private; other users' runs on
        # it stop (security review N10). Receivers import models, which load only once apps are
        # ready (as webapp.accounts.apps does).
        from webapp.runs import receivers

        receivers.connect()
