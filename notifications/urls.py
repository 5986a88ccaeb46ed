from django.urls import path

from notifications import views

urlpatterns = [
    path("projects/<slug:slug>/notifications/", views.notification_settings, name="notification-settings"),
    path("projects/<slug:slug>/notifications/mine/", views.set_preference, name="notification-preference"),
    path("projects/<slug:slug>/notifications/channels/", views.add_channel, name="notification-channel-add"),
    path(
        "projects/<slug:slug>/notifications/channels/<int:pk>/remove/",
        views.remove_channel,
        name="notification-channel-remove",
    ),
]
