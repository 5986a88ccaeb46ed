# Copied into the one audit log (core 0003) first, then dropped.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('core', '0003_one_log'),
        ('profiles', '0014_one_live_instance_per_provider_resource'),
    ]

    operations = [
        migrations.DeleteModel(
            name='CredentialEvent',
        ),
    ]
