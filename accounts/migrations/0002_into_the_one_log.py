# Copied into the one audit log (core 0003) first, then dropped.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('core', '0003_one_log'),
        ('accounts', '0001_initial'),
    ]

    operations = [
        migrations.DeleteModel(
            name='PasswordEvent',
        ),
    ]
