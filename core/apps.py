from django.apps import AppConfig


class CoreConfig(AppConfig):
    """The kit at the bottom: page messages from refusals, times, health, throttling, middleware and the
    site's own pages (sign-in, errors). It imports no app; every app may import it."""

    name = "core"
    verbose_name = "Kit"
