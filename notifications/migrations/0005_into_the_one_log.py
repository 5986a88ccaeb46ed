# Copied into the one audit log (core 0003) first, then dropped.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('core', '0003_one_log'),
        ('notifications', '0004_approval_webhooks_become_channels'),
    ]

    operations = [
        migrations.DeleteModel(
            name='NotifyVariableEvent',
        ),
    ]
