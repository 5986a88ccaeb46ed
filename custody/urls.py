from django.urls import path

from custody import views

urlpatterns = [
    path("custody/<int:pk>.json", views.custody_json, name="custody-json"),
]
