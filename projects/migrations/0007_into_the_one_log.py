# Copied into the one audit log (core 0003) first, then dropped.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('core', '0003_one_log'),
        ('projects', '0006_approval_webhook_is_a_channel'),
    ]

    operations = [
        migrations.RemoveField(
            model_name='membershipevent',
            name='actor',
        ),
        migrations.RemoveField(
            model_name='membershipevent',
            name='project',
        ),
        migrations.RemoveField(
            model_name='membershipevent',
            name='user',
        ),
        migrations.RemoveField(
            model_name='roleevent',
            name='actor',
        ),
        migrations.RemoveField(
            model_name='roleevent',
            name='project',
        ),
        migrations.RemoveField(
            model_name='roleevent',
            name='user',
        ),
        migrations.DeleteModel(
            name='EnvelopeEvent',
        ),
        migrations.DeleteModel(
            name='MembershipEvent',
        ),
        migrations.DeleteModel(
            name='RoleEvent',
        ),
    ]
