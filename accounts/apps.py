from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts: a person's own password"

    def ready(self):
        from accounts import signals  # noqa: F401 (connects the sign-in receiver)
