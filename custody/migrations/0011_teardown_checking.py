# A filed request is checked on the box by a task (checking), and may be refused by those checks.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('custody', '0010_auditentry_moves_to_core'),
    ]

    operations = [
        migrations.AlterField(
            model_name='teardownrequest',
            name='redrives',
            field=models.PositiveSmallIntegerField(default=0, help_text='Times beat re-enqueued it (checking or approved)'),
        ),
        migrations.AlterField(
            model_name='teardownrequest',
            name='status',
            field=models.CharField(choices=[('checking', 'Checking its proofs on the box'), ('refused', 'Refused by its checks'), ('pending', 'Pending approval'), ('approved', 'Approved'), ('rejected', 'Rejected'), ('expired', 'Expired'), ('executing', 'Executing'), ('attest', 'Awaiting console attestation'), ('attention', 'Needs a person'), ('done', 'Done'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], default='pending', max_length=10),
        ),
    ]
