"""Projects (a team's line of work); runs and their events join them in later migrations."""

from django.db import models
from django.urls import reverse


class ProjectQuerySet(models.QuerySet):
    def visible_to(self, user):
        # History is shared across the team: every signed-in user sees every project.
        if not user.is_authenticated:
            return self.none()
        return self


class Project(models.Model):
    name = models.CharField(max_length=80, unique=True)
    slug = models.SlugField(
        max_length=40,
        unique=True,
        help_text="Lowercase letters, digits and hyphens; used in node paths and instance names.",
    )
    description = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)

    objects = ProjectQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        permissions = [
            ("operate", "May create instances and launch runs"),
            ("approve_cost", "May approve cost actions (shutdown, release, deletion)"),
        ]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("project-detail", args=[self.slug])
