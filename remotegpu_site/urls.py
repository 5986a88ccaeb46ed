from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from api import pages as api_pages
from core import views

urlpatterns = [
    path("login/", views.ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("health.json", views.health_json, name="health"),
    path("admin/", admin.site.urls),
    path("", include("accounts.urls")),
    path("", include("console.urls")),
    path("", include("projects.urls")),
    path("", include("fleet.urls")),
    path("", include("datasets.urls")),
    path("", include("runs.urls")),
    path("", include("custody.urls")),
    path("", include("delivery.urls")),
    path("", include("rentals.urls")),
    path("", include("notifications.urls")),
    path("api/docs/", api_pages.docs, name="api-docs"),
    path("api/", include("api.urls")),
    path("account/tokens/", api_pages.tokens, name="api-tokens"),
]

# Under /api/ Django's own error pages answer in JSON as well.
handler400 = views.bad_request
handler403 = views.permission_denied
handler404 = views.page_not_found
handler500 = views.server_error
