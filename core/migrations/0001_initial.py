# custody's AuditEntry, taken over as it is (the table custody_auditentry stays; state only).
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("custody", "0010_auditentry_moves_to_core"),
        ("profiles", "0014_one_live_instance_per_provider_resource"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="AuditEntry",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("at", models.DateTimeField(auto_now_add=True, db_index=True)),
                        ("action", models.CharField(db_index=True, max_length=32)),
                        ("message", models.TextField()),
                        ("data", models.JSONField(blank=True, default=dict)),
                        ("actor", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to=settings.AUTH_USER_MODEL)),
                        ("instance", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to="profiles.instance")),
                        ("request", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to="custody.teardownrequest")),
                    ],
                    options={"ordering": ["-at", "-id"], "db_table": "custody_auditentry"},
                ),
            ],
        ),
    ]
