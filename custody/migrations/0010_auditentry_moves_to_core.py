# The teardown log becomes the one audit log of every app (core.AuditEntry): its table stays.
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("custody", "0009_mirror_mount")]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name="AuditEntry")]),
    ]
