"""manage.py check_rollups [--fix]: recompute the kept project/box totals from the runs and compare."""

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from runs import rollups


class Command(BaseCommand):
    help = "Recompute per-project and per-box run totals from the runs; --fix makes the kept ones equal."

    def add_arguments(self, parser):
        parser.add_argument("--fix", action="store_true", help="rewrite the totals that differ")

    def handle(self, *args, fix=False, **options):
        differ = rollups.mismatches()
        for line in differ:
            self.stdout.write(line)
        if differ and fix:
            with transaction.atomic():
                changed = rollups.rebuild()
            self.stdout.write(f"rewrote {changed} total(s)")
            return
        if differ:
            raise CommandError(f"{len(differ)} kept total(s) differ from the runs (run with --fix to rewrite them)")
        self.stdout.write("every kept total equals its recomputation")
