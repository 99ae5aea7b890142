from django.apps import AppConfig


class WorkbenchConfig(AppConfig):
    """Trying rewards before a GPU is spent: the composer, dry runs, learnability, re-scoring.
    It sits above runs and evaluations, whose rollouts and episodes it scores."""

    name = "webapp.workbench"
    label = "workbench"

    def ready(self) -> None:
        # The new-run page (runs, below this app) starts learnability probes through this.
        from webapp.runs.probe import register_probe_starter
        from webapp.workbench.probe import run_probe_create

        register_probe_starter(run_probe_create)
