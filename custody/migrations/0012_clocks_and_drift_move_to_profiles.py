# Clock alarms and provider drift are facts about the boxes: their models move to profiles (state only;
# the tables custody_clockalarm and custody_providerdrift stay, with their rows).
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("custody", "0011_teardown_checking")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="ClockAlarm"), migrations.DeleteModel(name="ProviderDrift")]
        ),
    ]
