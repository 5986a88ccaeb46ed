from django.urls import path

from projects import views

urlpatterns = [
    path("team/", views.team, name="team"),
    path("team/users/", views.team_create_user, name="team-create-user"),
    path("team/users/<int:pk>/", views.team_set_roles, name="team-set-roles"),
]
