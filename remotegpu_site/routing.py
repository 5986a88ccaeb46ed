from django.urls import re_path

from runs.consumers import InstanceConsumer, ProjectConsumer, RunConsumer

websocket_urlpatterns = [
    re_path(r"^ws/runs/(?P<run_id>[A-Za-z0-9_-]{1,64})/$", RunConsumer.as_asgi()),
    re_path(r"^ws/projects/(?P<slug>[A-Za-z0-9_-]{1,40})/$", ProjectConsumer.as_asgi()),
    re_path(r"^ws/instances/(?P<pk>[0-9]{1,18})/$", InstanceConsumer.as_asgi()),
]
