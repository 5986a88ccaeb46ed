# The teardown models, moved from custody with their tables (db_table keeps the custody_ names):
# Django's state only, nothing is created.

import django.db.models.deletion
import uuid
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('custody', '0017_teardown_batch'),
        ('profiles', '0023_hooks_help_names_platforms'),
        ('runs', '0028_trainer_files'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='TeardownRequest',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('shutdown', 'Shut down'), ('release', 'Release'), ('delete_evidence', 'Delete evidence'), ('delete_resource', 'Delete resource')], max_length=16)),
                        ('location', models.CharField(blank=True, choices=[('node', 'export on the box'), ('custody', 'custody copy'), ('mirror', 'durable mirror on the box')], max_length=8)),
                        ('level', models.CharField(max_length=2)),
                        ('needs_second_person', models.BooleanField(default=True)),
                        ('reason', models.TextField()),
                        ('status', models.CharField(choices=[('checking', 'Checking its proofs on the box'), ('refused', 'Refused by its checks'), ('pending', 'Pending approval'), ('approved', 'Approved'), ('rejected', 'Rejected'), ('expired', 'Expired'), ('executing', 'Executing'), ('attest', 'Awaiting console attestation'), ('attention', 'Needs a person'), ('done', 'Done'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], default='pending', max_length=10)),
                        ('check_at_request', models.JSONField(default=dict)),
                        ('check_at_execution', models.JSONField(blank=True, default=dict)),
                        ('created', models.DateTimeField(auto_now_add=True)),
                        ('expires_at', models.DateTimeField()),
                        ('decided_at', models.DateTimeField(blank=True, null=True)),
                        ('decision_comment', models.TextField(blank=True)),
                        ('waive_active', models.BooleanField(default=False, help_text='An L3 approver waived unclosed active/ dirs')),
                        ('retire_hold', models.BooleanField(default=False, help_text="This release retires the instance's hold")),
                        ('idempotency_key', models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                        ('attempts', models.PositiveSmallIntegerField(default=0)),
                        ('redrives', models.PositiveSmallIntegerField(default=0, help_text='Times beat re-enqueued it (checking or approved)')),
                        ('redriven_at', models.DateTimeField(blank=True, null=True)),
                        ('started_at', models.DateTimeField(blank=True, null=True)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('proof_started_at', models.DateTimeField(blank=True, null=True)),
                        ('proof_seconds', models.FloatField(blank=True, null=True)),
                        ('provider_answer', models.JSONField(blank=True, default=dict)),
                        ('failure', models.TextField(blank=True)),
                        ('offline_verified', models.BooleanField(null=True)),
                        ('batch', models.UUIDField(blank=True, db_index=True, null=True)),
                        ('approver', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('attested_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('instance', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='teardown_requests', to='profiles.instance')),
                        ('requester', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('resource', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='teardown_requests', to='profiles.resource')),
                        ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='runs.run')),
                    ],
                    options={
                        'db_table': 'custody_teardownrequest',
                        'ordering': ['-created', '-id'],
                    },
                ),
                migrations.CreateModel(
                    name='ReleaseHold',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('created', models.DateTimeField(auto_now_add=True)),
                        ('reason', models.TextField()),
                        ('retired_at', models.DateTimeField(blank=True, null=True)),
                        ('retired_reason', models.TextField(blank=True)),
                        ('created_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('instance', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='holds', to='profiles.instance')),
                        ('retired_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('retired_by_request', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to='delivery.teardownrequest')),
                    ],
                    options={
                        'db_table': 'custody_releasehold',
                        'ordering': ['-created'],
                    },
                ),
                migrations.CreateModel(
                    name='WasteAlarm',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('verified', 'Every run on it is exported and verified, and it still bills'), ('idle', 'Running with no live run'), ('stopped', 'Stopped on a platform whose stop keeps billing'), ('resources', 'Released, and its volumes, IPs or snapshots still bill')], max_length=10)),
                        ('since', models.DateTimeField(help_text='When the box began to bill for nothing')),
                        ('threshold_minutes', models.PositiveIntegerField()),
                        ('hourly', models.DecimalField(decimal_places=4, max_digits=10)),
                        ('accrued', models.DecimalField(decimal_places=2, help_text='Billed since `since`, when raised', max_digits=12)),
                        ('suggested', models.CharField(help_text='The teardown kind the alarm offers', max_length=20)),
                        ('message', models.TextField()),
                        ('raised_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                        ('instance', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='waste_alarms', to='profiles.instance')),
                        ('request', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='delivery.teardownrequest')),
                    ],
                    options={
                        'db_table': 'custody_wastealarm',
                        'ordering': ['-raised_at', '-id'],
                        'constraints': [models.UniqueConstraint(fields=('instance', 'kind', 'since', 'threshold_minutes'), name='one_waste_alarm_per_threshold')],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
