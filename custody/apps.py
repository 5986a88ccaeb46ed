from django.apps import AppConfig


class CustodyConfig(AppConfig):
    name = "custody"
    verbose_name = "Custody and teardown"
