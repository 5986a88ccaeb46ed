"""The approval webhook is one of the project's notification channels now (notifications 0004 moved it)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("projects", "0005_roles_per_project"),
        ("notifications", "0004_approval_webhooks_become_channels"),
    ]

    operations = [
        migrations.RemoveField(model_name="project", name="approval_webhook"),
    ]
