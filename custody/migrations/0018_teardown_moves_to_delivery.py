# Teardown requests, holds and waste alarms move to the delivery app: state only; the tables
# custody_teardownrequest, custody_releasehold and custody_wastealarm stay, with their rows.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('custody', '0017_teardown_batch'),
        ('core', '0009_audit_request_moves_to_delivery'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name='teardownrequest',
                    name='approver',
                ),
                migrations.RemoveField(
                    model_name='teardownrequest',
                    name='attested_by',
                ),
                migrations.RemoveField(
                    model_name='teardownrequest',
                    name='instance',
                ),
                migrations.RemoveField(
                    model_name='teardownrequest',
                    name='requester',
                ),
                migrations.RemoveField(
                    model_name='teardownrequest',
                    name='resource',
                ),
                migrations.RemoveField(
                    model_name='teardownrequest',
                    name='run',
                ),
                migrations.RemoveField(
                    model_name='wastealarm',
                    name='request',
                ),
                migrations.RemoveField(
                    model_name='wastealarm',
                    name='instance',
                ),
                migrations.DeleteModel(
                    name='ReleaseHold',
                ),
                migrations.DeleteModel(
                    name='TeardownRequest',
                ),
                migrations.DeleteModel(
                    name='WasteAlarm',
                ),
            ],
            database_operations=[],
        ),
    ]
