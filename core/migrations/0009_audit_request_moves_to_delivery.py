# An audit entry's request is delivery's TeardownRequest now (the same table): state only.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('core', '0008_alter_auditentry_action'),
        ('delivery', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='auditentry',
                    name='request',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to='delivery.teardownrequest'),
                ),
            ],
            database_operations=[],
        ),
    ]
