from django.urls import path

from runs import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("projects/new/", views.ProjectCreateView.as_view(), name="project-create"),
    path("projects/<slug:slug>/", views.project_detail, name="project-detail"),
]
