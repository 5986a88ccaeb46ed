from django.urls import path

from delivery import views

urlpatterns = [
    path("instances/<int:pk>/teardown/", views.teardown_create, name="teardown-create"),
    path("instances/<int:pk>/teardown/evidence/", views.teardown_select_evidence, name="teardown-select-evidence"),
    path("teardown/batch/<uuid:batch>/decide/", views.teardown_decide_batch, name="teardown-decide-batch"),
    path("instances/<int:pk>/hold/", views.instance_hold, name="instance-hold"),
    path("instances/<int:pk>/cache-cleanup/", views.instance_cache_cleanup, name="instance-cache-cleanup"),
    path("teardown/<int:pk>/", views.teardown_detail, name="teardown-detail"),
    path("teardown/<int:pk>/decide/", views.teardown_decide, name="teardown-decide"),
    path("teardown/<int:pk>/attest/", views.teardown_attest, name="teardown-attest"),
    path("teardown/<int:pk>/retry/", views.teardown_retry, name="teardown-retry"),
    path("teardown/<int:pk>/cancel/", views.teardown_cancel, name="teardown-cancel"),
    path("teardown/<int:pk>/settle/", views.teardown_settle, name="teardown-settle"),
    path("projects/<slug:slug>/waste-shutdown/", views.project_waste_shutdown, name="project-waste-shutdown"),
]
