from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class ProfilesConfig(AppConfig):
    name = "profiles"
    verbose_name = "Platform profiles and instances"

    def ready(self):
        from profiles.catalog import install, load_catalog
        from profiles.schema import ProfileError

        # A broken profile must stop start-up, not surface later as a wrong teardown level.
        try:
            install(load_catalog(settings.PROFILES_DIR))
        except ProfileError as exc:
            raise ImproperlyConfigured(f"Broken platform profile: {exc}") from None
