from django.urls import path

from accounts import views

urlpatterns = [
    path("account/password/", views.PasswordChangeView.as_view(), name="password-change"),
    path("account/password/reset/", views.PasswordResetView.as_view(), name="password-reset"),
    path("account/password/reset/sent/", views.PasswordResetDoneView.as_view(), name="password-reset-done"),
    path(
        "account/password/reset/<uidb64>/<token>/",
        views.PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",  # the name Django's reset mail context expects
    ),
]
