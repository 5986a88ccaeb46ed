from django.contrib.auth.decorators import login_not_required
from django.urls import include, path, re_path
from rest_framework.routers import DefaultRouter

from api import errors, rentals, views

router = DefaultRouter(trailing_slash=True)
router.register("projects", views.ProjectViewSet, basename="api-project")
router.register("instances", views.InstanceViewSet, basename="api-instance")
router.register("datasets", views.DatasetViewSet, basename="api-dataset")
router.register("runs", views.RunViewSet, basename="api-run")
router.register("sweeps", views.SweepViewSet, basename="api-sweep")
router.register("custody", views.CustodyViewSet, basename="api-custody")
router.register("teardown", views.TeardownViewSet, basename="api-teardown")
router.register("rentals", rentals.RentalViewSet, basename="api-rental")


def _open(patterns):
    """DRF authenticates API calls itself (token or session): the site's login redirect must not."""
    for pattern in patterns:
        if hasattr(pattern, "callback"):
            pattern.callback = login_not_required(pattern.callback)
    return patterns


urlpatterns = [
    path("", include(_open(router.urls))),
    # Signed in (session or token) like every other API route: the schema maps the whole attack surface.
    path("schema/", login_not_required(views.SchemaView.as_view()), name="api-schema"),
    re_path(r"^.*$", login_not_required(errors.not_found)),
]
