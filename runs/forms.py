from django import forms

from runs.models import Project


class ProjectForm(forms.ModelForm):
    class Meta:
        model = Project
        fields = ["name", "slug", "description"]

    def clean_slug(self):
        slug = self.cleaned_data["slug"]
        if slug != slug.lower() or "_" in slug:
            raise forms.ValidationError("Use lowercase letters, digits and hyphens only (it becomes a node path).")
        return slug
