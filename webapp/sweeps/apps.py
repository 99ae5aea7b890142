from django.apps import AppConfig


class SweepsConfig(AppConfig):
    name = "webapp.sweeps"
    label = "sweeps"

    def ready(self) -> None:
        # Runs sit below sweeps and announce a run's end (webapp/runs/signals.py); a pending
        # member is released into the slot it freed. Receivers import models: loaded once apps are ready.
        from webapp.sweeps import receivers

        receivers.connect()
