from django.contrib import admin

from fleet.models import Instance, InstanceEvent, InstanceProbe, PlatformAcknowledgement


@admin.register(Instance)
class InstanceAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "profile_key", "host", "state", "created"]
    list_filter = ["profile_key", "state"]
    search_fields = ["name", "host"]
    # The pinned key changes only through the confirm action, which records who and when.
    readonly_fields = ["host_key_type", "host_key_base64", "host_key_confirmed_at", "host_key_confirmed_by"]


@admin.register(InstanceEvent)
class InstanceEventAdmin(admin.ModelAdmin):
    list_display = ["at", "instance", "kind", "message", "actor"]
    list_filter = ["kind"]


@admin.register(InstanceProbe)
class InstanceProbeAdmin(admin.ModelAdmin):
    list_display = ["at", "instance", "kind", "trigger", "reachable", "ok", "duration_ms"]


@admin.register(PlatformAcknowledgement)
class PlatformAcknowledgementAdmin(admin.ModelAdmin):
    list_display = ["at", "project", "profile_key", "user"]
