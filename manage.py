#!/usr/bin/env python
"""Django's command-line utility for RemoteGPU."""

import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "remotegpu_site.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # A bad setting is the operator's to fix: one clear line, not a traceback.
        sys.exit(f"Configuration error: {exc}")


if __name__ == "__main__":
    main()
