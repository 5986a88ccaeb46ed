from django.urls import path

from notifications import views

urlpatterns = [
    path("notifications/variables/", views.variable_list, name="notify-variable-list"),
    path("notifications/variables/new/", views.variable_edit, name="notify-variable-create"),
    path("notifications/variables/<int:pk>/", views.variable_edit, name="notify-variable-edit"),
    path("projects/<slug:slug>/notifications/", views.notification_settings, name="notification-settings"),
    path("projects/<slug:slug>/notifications/mine/", views.set_preference, name="notification-preference"),
    path("projects/<slug:slug>/notifications/channels/", views.add_channel, name="notification-channel-add"),
    path(
        "projects/<slug:slug>/notifications/channels/<int:pk>/remove/",
        views.remove_channel,
        name="notification-channel-remove",
    ),
]
