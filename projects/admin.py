from django.contrib import admin

from projects.models import Membership, Project


class MembershipInline(admin.TabularInline):
    """Members and their roles in this project (the Team page and the project page audit changes;
    this form is an admin's escape hatch)."""

    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "created"]
    prepopulated_fields = {"slug": ["name"]}
    search_fields = ["name", "slug"]
    inlines = [MembershipInline]
