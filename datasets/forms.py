"""Registering a dataset: its name, where its bytes are, and optionally the roster they must match."""

import json

from django import forms

from datasets.models import DatasetSource
from fleet.models import Instance
from projects.models import Project, Role


class DatasetForm(forms.Form):
    project = forms.ModelChoiceField(queryset=Project.objects.none())
    name = forms.SlugField(max_length=60, help_text="How runs name it, e.g. imagenet-mini")
    source_kind = forms.ChoiceField(label="Where the bytes are", choices=DatasetSource.choices)
    source_path = forms.CharField(
        max_length=500, help_text="The directory: on the control host (under its source roots) or on the box"
    )
    source_instance = forms.ModelChoiceField(
        label="Box", queryset=Instance.objects.none(), required=False, help_text="For a directory on a box"
    )
    roster_text = forms.CharField(
        label="Roster (optional)",
        required=False,
        max_length=20_000_000,
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
        help_text='JSON: [{"path": "train/x.bin", "bytes": 123, "sha256": "…"}, …]. The files must match it.',
    )

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        operated = Project.objects.where_role(user, Role.OPERATOR)
        self.fields["project"].queryset = operated
        self.fields["source_instance"].queryset = Instance.objects.filter(project__in=operated).billing()

    def clean_roster_text(self):
        text = self.cleaned_data["roster_text"].strip()
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"Not JSON: {exc}") from None
