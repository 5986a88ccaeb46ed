from django.db import migrations
from django.utils.text import slugify


def _name_for(reference: str, kind: str, taken: set) -> str:
    stem = slugify(reference.removeprefix("env:").rsplit("/", 1)[-1].replace("_", "-"))[:50] or kind
    name, n = stem, 2
    while name in taken:
        name, n = f"{stem}-{n}", n + 1
    taken.add(name)
    return name


def registered_from_references(apps, schema_editor):
    """Each free-form reference in use becomes a registered credential granted to the projects using it."""
    Instance = apps.get_model("profiles", "Instance")
    Credential = apps.get_model("profiles", "Credential")
    CredentialEvent = apps.get_model("profiles", "CredentialEvent")
    taken = set(Credential.objects.values_list("name", flat=True))
    for field, target, kind in (
        ("credential_ref", "credential", "ssh-key"),
        ("api_key_ref", "api_credential", "provider-key"),
    ):
        for instance in Instance.objects.exclude(**{field: ""}).order_by("pk"):
            reference = getattr(instance, field).strip()
            credential = Credential.objects.filter(kind=kind, reference=reference).first()
            if credential is None:
                credential = Credential.objects.create(
                    name=_name_for(reference, kind, taken), kind=kind, reference=reference
                )
                CredentialEvent.objects.create(credential=credential, message="Registered from instances' references")
            credential.projects.add(instance.project_id)
            setattr(instance, target, credential)
            instance.save(update_fields=[target])


class Migration(migrations.Migration):
    dependencies = [("profiles", "0006_credential_registry")]

    operations = [migrations.RunPython(registered_from_references, migrations.RunPython.noop)]
