"""A project's approval webhook becomes one of its channels (teardown.requested): approvers and scripts
hear of a request on one path, the outbox, with its claims and retries, not a best-effort POST beside it."""

from django.db import migrations

NAME = "Approval webhook"


def webhooks_to_channels(apps, schema_editor):
    Project, Channel = apps.get_model("projects", "Project"), apps.get_model("notifications", "Channel")
    for project in Project.objects.exclude(approval_webhook=""):
        Channel.objects.get_or_create(
            project=project,
            name=NAME,
            defaults={"kind": "webhook", "url": project.approval_webhook, "events": ["teardown.requested"]},
        )


def channels_to_webhooks(apps, schema_editor):
    Project, Channel = apps.get_model("projects", "Project"), apps.get_model("notifications", "Channel")
    for channel in Channel.objects.filter(name=NAME, kind="webhook"):
        Project.objects.filter(pk=channel.project_id).update(approval_webhook=channel.url)
        channel.delete()


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0003_budget_event"),
        ("projects", "0005_roles_per_project"),
    ]

    operations = [migrations.RunPython(webhooks_to_channels, channels_to_webhooks)]
