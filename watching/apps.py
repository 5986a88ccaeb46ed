from django.apps import AppConfig


class WatchingConfig(AppConfig):
    name = "watching"
    verbose_name = "Watching: one durable watcher per box with live runs"
