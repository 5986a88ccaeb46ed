"""Create the first admin with a generated password, printed once; do nothing when one exists."""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the first admin user (every role in every project) if there is none."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    def handle(self, *args, username, **options):
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            self.stdout.write("Admin user already exists; its password is not shown again.")
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser(username=username, email="", password=password)  # every role, everywhere
        self.stdout.write(
            self.style.SUCCESS(f"Created admin user '{username}' with password: {password}")
            + "\n(shown once; change it under Password in the navigation)"
        )
