from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The pages on top that combine what the apps below hold: the dashboard, the history page,
    comparison, the instance page, the sweep grid and the approval queue. Nothing imports it but the
    API and the wiring."""

    name = "console"
    verbose_name = "Console"
