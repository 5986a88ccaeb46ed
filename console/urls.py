from django.urls import path

from console import views

# Before runs' own patterns: "runs/compare/" is not a run called "compare".
urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("runs/", views.run_list, name="run-list"),
    path("runs/compare/", views.run_compare, name="run-compare"),
    path("sweeps/<int:pk>/", views.sweep_detail, name="sweep-detail"),
    path("instances/<int:pk>/", views.instance_detail, name="instance-detail"),
    path("approvals/", views.approval_queue, name="approval-queue"),
    path("audit/", views.audit_log, name="audit-log"),
]
