# Clock alarms and provider drift, taken over from custody as they are (state only: the tables stay).
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("profiles", "0015_into_the_one_log"),
        ("custody", "0012_clocks_and_drift_move_to_profiles"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ClockAlarm",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("clock", models.CharField(max_length=40)),
                        ("what", models.TextField()),
                        ("fires_at", models.DateTimeField()),
                        ("threshold_hours", models.PositiveIntegerField(help_text="0: the clock has fired")),
                        ("raised_at", models.DateTimeField(auto_now_add=True, db_index=True)),
                        ("instance", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="clock_alarms", to="profiles.instance")),
                    ],
                    options={
                        "db_table": "custody_clockalarm",
                        "ordering": ["fires_at", "id"],
                        "constraints": [models.UniqueConstraint(fields=("instance", "clock", "fires_at", "threshold_hours"), name="one_alarm_per_threshold")],
                    },
                ),
                migrations.CreateModel(
                    name="ProviderDrift",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("profile_key", models.CharField(max_length=40)),
                        ("provider_id", models.CharField(max_length=200)),
                        ("kind", models.CharField(choices=[("orphan", "Billed by the provider, unknown here"), ("still_billing", "Released here, still at the provider"), ("running_not_stopped", "Stopped here, running at the provider")], max_length=24)),
                        ("detail", models.TextField()),
                        ("first_seen", models.DateTimeField(auto_now_add=True)),
                        ("last_seen", models.DateTimeField()),
                        ("resolved_at", models.DateTimeField(blank=True, null=True)),
                        ("credential", models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="drifts", to="profiles.credential")),
                        ("instance", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="drifts", to="profiles.instance")),
                    ],
                    options={
                        "db_table": "custody_providerdrift",
                        "ordering": ["-first_seen", "-id"],
                        "constraints": [models.UniqueConstraint(condition=models.Q(("resolved_at__isnull", True)), fields=("profile_key", "provider_id", "kind"), name="one_open_drift_per_box_and_kind")],
                    },
                ),
            ],
        ),
    ]
