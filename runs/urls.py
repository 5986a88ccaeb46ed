from django.urls import path

from runs import log_views, views

urlpatterns = [
    path("projects/new/", views.ProjectCreateView.as_view(), name="project-create"),
    path("projects/<slug:slug>/", views.project_detail, name="project-detail"),
    path("projects/<slug:slug>/members/", views.project_add_member, name="project-add-member"),
    path("projects/<slug:slug>/envelope/", views.project_envelope, name="project-envelope"),
    path("projects/<slug:slug>/members/remove/", views.project_remove_member, name="project-remove-member"),
    path("runs/new/", views.run_create, name="run-create"),
    path("spend/<int:pk>/decide/", views.spend_decide, name="spend-decide"),
    path("sweeps/new/", views.sweep_create, name="sweep-create"),
    path("runs/<slug:run_id>/", views.run_detail, name="run-detail"),
    path("runs/<slug:run_id>/live.json", views.run_live, name="run-live"),
    path("runs/<slug:run_id>/edit/", views.run_edit, name="run-edit"),
    path("runs/<slug:run_id>/log/", log_views.run_log, name="run-log"),
    path("runs/<slug:run_id>/log/download/", log_views.run_log_download, name="run-log-download"),
    path("runs/<slug:run_id>/preflight/", views.run_preflight, name="run-preflight"),
    path("runs/<slug:run_id>/waive-gpu/", views.run_waive_gpu, name="run-waive-gpu"),
    path("runs/<slug:run_id>/accept-gpus/", views.run_accept_gpus, name="run-accept-gpus"),
    path("runs/<slug:run_id>/retry/", views.run_retry, name="run-retry"),
    path("runs/<slug:run_id>/continue/", views.run_continue, name="run-continue"),
    path("runs/<slug:run_id>/stop/", views.run_stop, name="run-stop"),
    path("runs/<slug:run_id>/close-active/", views.run_close_active, name="run-close-active"),
    path("runs/<slug:run_id>/reseal/", views.run_reseal, name="run-reseal"),
    path("runs/<slug:run_id>/refresh/", views.run_refresh, name="run-refresh"),
]
