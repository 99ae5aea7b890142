from django.urls import path

from webapp.rewards import views

urlpatterns = [
    path("rewards/", views.recipe_list, name="recipe-list"),
    path("rewards/new/", views.recipe_new, name="recipe-new"),
    path("rewards/<int:pk>/", views.recipe_detail, name="recipe-detail"),
]
