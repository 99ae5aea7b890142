from django.apps import AppConfig


class EvaluationsConfig(AppConfig):
    name = "webapp.evaluations"
    label = "evaluations"
