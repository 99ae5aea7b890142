from django.urls import path

from webapp.accounts import views

urlpatterns = [
    path("login/", views.EnvlabLoginView.as_view(), name="login"),
    path("logout/", views.EnvlabLogoutView.as_view(), name="logout"),
    path("account/", views.AccountView.as_view(), name="account"),
]
