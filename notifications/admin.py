from django.contrib import admin

from notifications.models import Channel, Notification


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin):
    list_display = ["project", "name", "kind", "enabled"]


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ["created", "project", "event", "state", "attempts"]
    list_filter = ["state", "event"]
