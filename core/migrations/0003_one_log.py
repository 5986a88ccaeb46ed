# The six append-only tables of access, credential and envelope changes are copied into the one log
# (their times kept), and teardown's entries get the project of their box. Reversible: going back
# copies these entries into the tables again (which the apps' next migrations drop going forward).
from django.db import migrations

ROLE = {"granted": "role.granted", "revoked": "role.revoked"}
MEMBER = {"added": "member.added", "removed": "member.removed"}
PASSWORD = {
    "issued": ("password.issued", "one-time password issued to {user}"),
    "changed": ("password.changed", "{user} changed their password"),
    "reset": ("password.reset", "{user} reset their password by mail"),
}


def _copy(entries, at, **fields):
    entry = entries.create(**fields)
    entries.filter(pk=entry.pk).update(at=at)  # the time of the change, not of this migration


def forward(apps, schema_editor):
    entries = apps.get_model("core", "AuditEntry").objects
    for old in apps.get_model("accounts", "PasswordEvent").objects.select_related("user"):
        action, text = PASSWORD[old.action]
        _copy(entries, old.at, action=action, message=text.format(user=old.user.username), actor_id=old.actor_id,
              subject_id=old.user_id)
    for old in apps.get_model("projects", "MembershipEvent").objects.select_related("user", "project"):
        verb = "added to" if old.action == "added" else "removed from"
        _copy(entries, old.at, action=MEMBER[old.action], message=f"{old.user.username} {verb} {old.project.slug}",
              actor_id=old.actor_id, project_id=old.project_id, subject_id=old.user_id)
    for old in apps.get_model("projects", "RoleEvent").objects.select_related("user"):
        verb = "granted to" if old.action == "granted" else "revoked from"
        _copy(entries, old.at, action=ROLE[old.action], message=f"{old.role} {verb} {old.user.username}",
              actor_id=old.actor_id, project_id=old.project_id, subject_id=old.user_id, data={"role": old.role})
    for old in apps.get_model("projects", "EnvelopeEvent").objects.all():
        message = f"{old.field.replace('_', ' ')}: {old.before or 'none'} → {old.after or 'none'}"
        data = {"field": old.field, "before": old.before, "after": old.after}
        _copy(entries, old.at, action="envelope.changed", message=message, actor_id=old.actor_id,
              project_id=old.project_id, data=data)
    for old in apps.get_model("profiles", "CredentialEvent").objects.select_related("credential"):
        _copy(entries, old.at, action="credential.changed", message=f"{old.credential.name}: {old.message}",
              actor_id=old.actor_id, credential_id=old.credential_id, data=old.data)
    for old in apps.get_model("notifications", "NotifyVariableEvent").objects.select_related("variable"):
        name = old.variable.variable
        _copy(entries, old.at, action="variable.changed", message=f"{name}: {old.message}", actor_id=old.actor_id,
              data={**old.data, "variable": name})
    instances = apps.get_model("profiles", "Instance").objects
    for instance_id, project_id in instances.values_list("pk", "project_id"):
        entries.filter(instance_id=instance_id, project_id__isnull=True).update(project_id=project_id)


def backward(apps, schema_editor):
    entries = apps.get_model("core", "AuditEntry").objects
    moved = entries.filter(action__contains=".", action__in=[*ROLE.values(), *MEMBER.values(), "envelope.changed",
                                                             "credential.changed", "variable.changed",
                                                             *(a for a, _ in PASSWORD.values())])
    password = {action: name for name, (action, _) in PASSWORD.items()}
    variables = {v.variable: v.pk for v in apps.get_model("notifications", "NotifyVariable").objects.all()}
    for entry in moved.order_by("at", "id"):
        action, common = entry.action, {"actor_id": entry.actor_id}
        if action in password:
            row = apps.get_model("accounts", "PasswordEvent")(user_id=entry.subject_id, action=password[action], **common)
        elif action in MEMBER.values():
            row = apps.get_model("projects", "MembershipEvent")(project_id=entry.project_id, user_id=entry.subject_id,
                                                                action=action.split(".")[1], **common)
        elif action in ROLE.values():
            row = apps.get_model("projects", "RoleEvent")(project_id=entry.project_id, user_id=entry.subject_id,
                                                          role=entry.data.get("role", ""), action=action.split(".")[1],
                                                          **common)
        elif action == "envelope.changed":
            row = apps.get_model("projects", "EnvelopeEvent")(project_id=entry.project_id, **common,
                                                              **{k: entry.data.get(k, "") for k in ("field", "before", "after")})
        elif action == "credential.changed":
            row = apps.get_model("profiles", "CredentialEvent")(credential_id=entry.credential_id, data=entry.data,
                                                                message=entry.message.split(": ", 1)[-1], **common)
        elif entry.data.get("variable") in variables:
            row = apps.get_model("notifications", "NotifyVariableEvent")(
                variable_id=variables[entry.data["variable"]], message=entry.message.split(": ", 1)[-1],
                data={k: v for k, v in entry.data.items() if k != "variable"}, **common)
        else:
            continue
        row.save()
        type(row).objects.filter(pk=row.pk).update(at=entry.at)
    moved.delete()  # a historical model has no append-only guard: these rows are moving back


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0002_audit_spine_links"),
        ("accounts", "0001_initial"),
        ("notifications", "0004_approval_webhooks_become_channels"),
        ("profiles", "0014_one_live_instance_per_provider_resource"),
        ("projects", "0006_approval_webhook_is_a_channel"),
    ]

    operations = [migrations.RunPython(forward, backward)]
