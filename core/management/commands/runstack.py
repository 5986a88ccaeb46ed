"""`manage.py runstack`: migrate, ensure an admin, and run web + worker + beat together."""

import subprocess

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import OperationalError, connection

from core import stack, wall


class Command(BaseCommand):
    help = "Run the web server, a Celery worker and Celery beat together; Ctrl-C stops them all."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, *args, host, port, **options):
        try:
            connection.ensure_connection()
        except OperationalError as exc:
            raise CommandError(f"The database in DATABASE_URL is unreachable: {str(exc).strip()[:200]}") from None
        private_redis = None
        redis_url = settings.REDIS_URL
        if stack.redis_reachable(redis_url):
            self.stdout.write(f"Redis: using REDIS_URL at {stack.redis_host_of(redis_url)}")
        else:
            try:
                private_redis, redis_url = stack.start_private_redis(settings.VAR_DIR)
            except RuntimeError as exc:
                raise CommandError(str(exc)) from None
            where = stack.redis_host_of(redis_url)
            self.stdout.write(f"Redis: REDIS_URL not reachable; started a private redis-server on {where}")

        refusal = wall.startup_problems(redis_url)
        if refusal:
            if private_redis is not None:
                stack.stop_all({"redis": private_redis})
            raise CommandError(wall.start_refusal(refusal))
        call_command("migrate", interactive=False, verbosity=0)
        call_command("ensure_admin", stdout=self.stdout)

        env = stack.child_env(redis_url, host)
        commands = stack.child_commands(host, port, settings.VAR_DIR)

        def start(name: str) -> subprocess.Popen:
            return subprocess.Popen(commands[name], env=env)

        children = {name: start(name) for name in commands}
        self.stdout.write(self.style.SUCCESS(f"RemoteGPU is up at http://{host}:{port}/  (Ctrl-C stops everything)"))
        self.stdout.flush()
        code = stack.supervise(children, lambda line: (self.stdout.write(line), self.stdout.flush()), start)
        if private_redis is not None:
            # Last, so the worker and beat never see their broker vanish under them.
            stack.stop_all({"redis": private_redis})
        if code:
            raise CommandError(f"stack stopped with exit code {code}")
