"""Roles per project: membership carries operator and approver.

The plain many-to-many table becomes the Membership model's (same table, same columns), gains the two
roles, and every member of the global groups "operators" / "approvers" holds that role in every project
they are a member of. The groups go: a global role would otherwise keep granting everywhere.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

GROUPS = {"operators": "operator", "approvers": "approver"}
CODENAMES = {"operate": "operator", "approve_cost": "approver"}


def _holders(apps, codename: str) -> set[int]:
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    by_group = User.objects.filter(groups__permissions__codename=codename)
    direct = User.objects.filter(user_permissions__codename=codename)
    return set(by_group.values_list("pk", flat=True)) | set(direct.values_list("pk", flat=True))


def global_to_projects(apps, schema_editor):
    Membership = apps.get_model("projects", "Membership")
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for codename, role in CODENAMES.items():
        Membership.objects.filter(user_id__in=_holders(apps, codename)).update(**{role: True})
    Group.objects.filter(name__in=GROUPS).delete()
    for permission in Permission.objects.filter(content_type__app_label="projects", codename__in=CODENAMES):
        permission.user_set.clear()


def projects_to_global(apps, schema_editor):
    """Back to global groups: whoever held a role in some project holds it everywhere again."""
    Membership = apps.get_model("projects", "Membership")
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    codename_of = {role: codename for codename, role in CODENAMES.items()}
    for name, role in GROUPS.items():
        group, _ = Group.objects.get_or_create(name=name)
        permission = Permission.objects.filter(content_type__app_label="projects", codename=codename_of[role]).first()
        if permission is not None:
            group.permissions.add(permission)
        holders = Membership.objects.filter(**{role: True}).values_list("user_id", flat=True).distinct()
        group.user_set.add(*holders)


class Migration(migrations.Migration):
    dependencies = [
        ("projects", "0004_envelope_history"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("runs", "0013_project_moves_to_projects"),  # the role permissions are the projects app's
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # The table exists (runs 0005, moved by runs 0013): only Django's picture of it changes.
            state_operations=[
                migrations.CreateModel(
                    name="Membership",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        (
                            "project",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="memberships",
                                to="projects.project",
                            ),
                        ),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="memberships",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={"db_table": "runs_project_members", "unique_together": {("project", "user")}},
                ),
                migrations.AlterField(
                    model_name="project",
                    name="members",
                    field=models.ManyToManyField(
                        blank=True, related_name="projects", through="projects.Membership", to=settings.AUTH_USER_MODEL
                    ),
                ),
            ]
        ),
        migrations.AddField(
            model_name="membership",
            name="operator",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddField(
            model_name="membership",
            name="approver",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddField(
            model_name="roleevent",
            name="project",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="role_events",
                to="projects.project",
            ),
        ),
        migrations.RunPython(global_to_projects, projects_to_global),
    ]
