from django import forms

from custody.models import EvidenceLocation
from delivery.models import TeardownKind
from fleet.models import Resource
from runs.models import Run, RunState


class TeardownRequestForm(forms.Form):
    kind = forms.ChoiceField(choices=TeardownKind.choices)
    reason = forms.CharField(max_length=2000, error_messages={"required": "Say why: the reason is audited."})
    run = forms.ModelChoiceField(queryset=Run.objects.none(), required=False, to_field_name="run_id")
    location = forms.ChoiceField(choices=[("", "—"), *EvidenceLocation.choices], required=False)
    retire_hold = forms.BooleanField(required=False)
    resource = forms.ModelChoiceField(queryset=Resource.objects.none(), required=False)

    def __init__(self, *args, instance=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["run"].queryset = Run.objects.filter(instance=instance, state=RunState.EXPORTED)
        self.fields["resource"].queryset = Resource.objects.filter(instance=instance, deleted_at__isnull=True)

    def clean(self):
        data = super().clean()
        if data.get("kind") == TeardownKind.DELETE_EVIDENCE and not (data.get("run") and data.get("location")):
            raise forms.ValidationError("Evidence deletion names one export and one location.")
        if data.get("kind") == TeardownKind.DELETE_RESOURCE and not data.get("resource"):
            raise forms.ValidationError("Resource deletion names one registered resource of this box.")
        if data.get("kind") != TeardownKind.DELETE_EVIDENCE:
            data["run"], data["location"] = None, ""
        if data.get("kind") != TeardownKind.DELETE_RESOURCE:
            data["resource"] = None
        return data


class EvidenceSelectionForm(forms.Form):
    """Evidence deletion over the exports a person ticks on the box's page: one location, one reason."""

    run = forms.ModelMultipleChoiceField(
        queryset=Run.objects.none(),
        to_field_name="run_id",
        required=False,
    )
    # Every sealed export of the box at once (a box with a thousand of them has no thousand ticks to make):
    # each still filed and checked on its own, so the last verified copy of any is never deleted.
    every = forms.BooleanField(required=False)
    location = forms.ChoiceField(choices=EvidenceLocation.choices)
    reason = forms.CharField(max_length=2000, error_messages={"required": "Say why: the reason is audited."})

    def __init__(self, *args, instance=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["run"].queryset = Run.objects.filter(instance=instance, state=RunState.EXPORTED)

    def clean(self):
        data = super().clean()
        if data.get("every"):
            data["run"] = list(self.fields["run"].queryset.order_by("pk"))
        if not data.get("run") and "run" not in self.errors:
            self.add_error("run", "Tick the exports whose copy should be deleted, or every export of the box.")
        return data
