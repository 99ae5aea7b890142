from django.urls import path

from webapp.workbench import views

urlpatterns = [
    path("rewards/new/", views.recipe_new, name="recipe-new"),
    path("rewards/<int:pk>/", views.recipe_detail, name="recipe-detail"),
]
