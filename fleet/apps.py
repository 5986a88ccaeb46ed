from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class FleetConfig(AppConfig):
    name = "fleet"
    # The label names the tables (profiles_instance, …) and the migration history: the boxes moved
    # out of the profiles package, their rows did not.
    label = "profiles"
    verbose_name = "Fleet: instances, credentials, probes and costs"

    def ready(self):
        from platforms.catalog import install, load_catalog
        from platforms.schema import ProfileError

        # A broken profile must stop start-up, not surface later as a wrong teardown level.
        try:
            install(load_catalog(settings.PROFILES_DIR))
        except ProfileError as exc:
            raise ImproperlyConfigured(f"Broken platform profile: {exc}") from None
