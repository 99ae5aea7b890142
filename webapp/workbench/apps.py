from django.apps import AppConfig


class WorkbenchConfig(AppConfig):
    """Trying rewards before a GPU is spent: the composer, dry runs, learnability, re-scoring.
    It sits above runs and evaluations, whose rollouts and episodes it scores."""

    name = "webapp.workbench"
    label = "workbench"
