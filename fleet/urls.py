from django.urls import path

from fleet import views

urlpatterns = [
    path("platforms/", views.platform_list, name="platform-list"),
    path("platforms/<slug:key>/", views.platform_detail, name="platform-detail"),
    path("instances/", views.instance_list, name="instance-list"),
    path("instances/new/", views.instance_create, name="instance-create"),
    path("instances/<int:pk>/probe/", views.instance_probe, name="instance-probe"),
    path("instances/<int:pk>/host-key/", views.instance_confirm_host_key, name="instance-host-key"),
    path("instances/<int:pk>/state/", views.instance_set_state, name="instance-state"),
    path("instances/<int:pk>/edit/", views.instance_edit, name="instance-edit"),
    path("instances/<int:pk>/resources/", views.instance_add_resource, name="instance-resource-add"),
    path("credentials/", views.credential_list, name="credential-list"),
    path("credentials/new/", views.credential_edit, name="credential-create"),
    path("credentials/<int:pk>/", views.credential_edit, name="credential-edit"),
]
