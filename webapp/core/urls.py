from django.urls import path

from webapp.core import plotly

urlpatterns = [
    path("vendor/plotly.min.js", plotly.plotly_js, name="plotly-js"),
]
