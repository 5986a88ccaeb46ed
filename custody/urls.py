from django.urls import path

from custody import views

urlpatterns = [
    path("custody/<int:pk>.json", views.custody_json, name="custody-json"),
    path("runs/<slug:run_id>/verify/", views.run_verify, name="run-verify"),
    path("runs/<slug:run_id>/report/", views.run_report, name="run-report"),
    path("projects/<slug:slug>/metrics/", views.project_metrics, name="project-metrics"),
]
