from django.urls import path

from webapp.rewards import views

urlpatterns = [
    path("rewards/", views.recipe_list, name="recipe-list"),
]
