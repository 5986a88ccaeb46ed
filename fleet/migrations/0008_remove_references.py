from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("profiles", "0007_credentials_from_references")]

    operations = [
        migrations.RemoveField(
            model_name="instance",
            name="api_key_ref",
        ),
        migrations.RemoveField(
            model_name="instance",
            name="credential_ref",
        ),
    ]
