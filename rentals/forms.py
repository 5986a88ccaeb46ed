import re

from django import forms

from fleet.actions import needs_acknowledgement
from fleet.control_host import local_node_problem
from fleet.forms import USER
from fleet.models import Credential, CredentialKind, InstanceState
from platforms import catalog
from providers import RENTABLE
from rentals.asking import read_candidates, read_image, read_models, read_volume, volume_size_problem
from rentals.models import Rental
from rentals.volumes import owner_here, volumes_of
from runs.actions.base import control_host_problem

REGION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")


class RentalForm(forms.ModelForm):
    """A rent by constraint. Everything is checked here, before anyone is asked to approve it."""

    gpu_models = forms.CharField(
        label="GPU model(s)", help_text="Any of these, comma-separated (e.g. A100, H100).", max_length=200
    )
    gpu_count = forms.IntegerField(label="GPUs", min_value=1, max_value=16, initial=1)
    gpu_memory_gb = forms.IntegerField(
        label="GPU memory (GB, at least, per GPU)", min_value=0, max_value=1024, initial=0
    )
    disk_gb = forms.IntegerField(label="Disk (GB)", min_value=10, max_value=20000, initial=50)
    max_rate = forms.DecimalField(label="Max $/h (the whole box)", min_value=0.01, max_digits=8, decimal_places=4)
    candidates = forms.CharField(
        label="Candidate providers, in order",
        help_text=f"Asked one after another until one has capacity: {', '.join(RENTABLE)}.",
        max_length=100,
    )
    expected_minutes = forms.IntegerField(min_value=1, max_value=60 * 24 * 30, initial=60)
    volume_gb = forms.IntegerField(
        label="Create the volume (GB)",
        min_value=0,
        max_value=4000,
        required=False,
        help_text="With a volume named: create it this large in the region where none of its name is listed.",
    )
    acknowledge = forms.BooleanField(
        required=False, label="I have read the candidate platforms' conveniences and danger clocks"
    )

    class Meta:
        model = Rental
        fields = [
            "purpose",
            "gpu_models",
            "gpu_count",
            "gpu_memory_gb",
            "disk_gb",
            "max_rate",
            "candidates",
            "ssh_credential",
            "ssh_user",
            "image",
            "expected_minutes",
            "run",
            "proving_box",
            "region",
            "durable_volume",
            "volume_gb",
        ]

    def __init__(self, *args, project, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.project, self.user = project, user
        granted = Credential.objects.filter(projects=project)
        self.fields["ssh_credential"].queryset = granted.filter(kind=CredentialKind.SSH_KEY)
        self.fields["ssh_credential"].label = "SSH key"
        self.fields["ssh_user"].label = "SSH user"
        self.fields["ssh_credential"].help_text = "Lambda is given its name (a key registered there under it)."
        self.fields["run"].queryset = project.runs.filter(state="draft", sweep__isnull=True)
        self.fields["run"].required = False
        self.fields["run"].label = "Continue into this draft run's preflight (optional)"
        self._proving_box_field(project)
        known = volumes_of(project)
        self.fields["durable_volume"].help_text = (
            f"{self.fields['durable_volume'].help_text} This project's: {'; '.join(known) if known else 'none yet'}. "
            "A volume another project holds is refused, whoever's key lists it."
        )
        keys = granted.filter(kind=CredentialKind.PROVIDER_KEY)
        for provider in RENTABLE:
            self.fields[f"key_{provider}"] = forms.ModelChoiceField(
                queryset=keys, required=False, label=f"{provider} API key", help_text="Needed to ask it."
            )

    def _proving_box_field(self, project) -> None:
        """Where the run is proven before the rent: a running box of the project nobody rents GPUs on for
        it (the control host's local node first, then the cheapest)."""
        boxes = project.instances.filter(state=InstanceState.RUNNING).order_by("rate_running", "name")
        admin = bool(self.user and self.user.is_superuser)
        # The control host is an administrator's box to run on, and only where this deployment runs commands
        # there at all: offered only then, and an administrator is told why it is not.
        absent = local_node_problem() if admin else "only an administrator proves a run there"
        if absent:
            boxes = boxes.exclude(profile_key__in=catalog.local_keys())
        field = self.fields["proving_box"]
        field.queryset, field.required = boxes, False
        field.label = "Prove the run first on"
        field.help_text = "Its input checks and CPU smoke pass here before anything is rented (needed with a run)."
        if absent and admin:
            field.help_text += f" The control host is not offered: {absent}."
        self.local_box = next((box for box in boxes if box.profile.is_local), None)
        field.initial = self.local_box.pk if self.local_box else None

    def clean_ssh_user(self):
        """The same rule as a registered box's user: it reaches ssh's argv (never an option like -oX=…)."""
        user = self.cleaned_data["ssh_user"].strip()
        if user and not USER.fullmatch(user):
            raise forms.ValidationError("A user name is lowercase letters, digits, '_', '.', '-'.")
        return user

    def clean_region(self):
        """A provider's region name (us-east-1, EU-RO-1): it goes into the create call as it is."""
        region = self.cleaned_data["region"].strip()
        if region and not REGION.fullmatch(region):
            raise forms.ValidationError("A region is letters, digits, '.', '_' and '-' (e.g. us-east-1).")
        return region

    def clean_image(self):
        try:
            return read_image(self.cleaned_data["image"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_gpu_models(self):
        try:
            return read_models(self.cleaned_data["gpu_models"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean(self):
        data = super().clean()
        if data.get("run") is not None:
            data["proving_box"] = data.get("proving_box") or self.local_box  # the local node, where there is one
        box, run = data.get("proving_box"), data.get("run")
        refused = control_host_problem(run, self.user) if run is not None and box and box.profile.is_local else None
        if refused:
            self.add_error("proving_box", refused)
        elif run is not None and box is None:
            self.add_error(
                "proving_box",
                "A rent for a run proves the run first where no GPU bills: name a box of the project (the control "
                "host's local node, or a cheap box) to run its checks and CPU smoke on.",
            )
        granted = {p: data[f"key_{p}"].pk for p in RENTABLE if data.get(f"key_{p}") is not None}
        if "candidates" in data:
            try:
                data["candidates"] = read_candidates(data["candidates"], granted)
            except ValueError as exc:
                self.add_error("candidates", str(exc))
            else:
                data["api_credentials"] = {p: granted[p] for p in data["candidates"]}
                try:
                    data["durable_volume"] = read_volume(data.get("durable_volume") or "", data["candidates"])
                    data["volume_gb"] = data.get("volume_gb") or 0
                    volume_size_problem(data["durable_volume"], data["volume_gb"], data.get("region") or "")
                    volume_owner_problem(self.project, data["candidates"][0], data["durable_volume"])
                except ValueError as exc:
                    self.add_error("durable_volume", str(exc))
                first_time = [p for p in data["candidates"] if needs_acknowledgement(self.project, p)]
                if first_time and not data.get("acknowledge"):
                    self.add_error("acknowledge", f"First box of {', '.join(first_time)} in this project: read first.")
        return data

    def save(self, commit=False):
        rental = super().save(commit=False)
        rental.project = self.project
        rental.api_credentials = self.cleaned_data["api_credentials"]
        return rental


def volume_owner_problem(project, provider: str, volume: str) -> None:
    """A named volume another project holds here is refused at the form, saying whose (the worker checks
    again against what the provider lists: a team's key lists every project's volumes)."""
    owner = owner_here(project.pk, provider, volume, volume) if volume else None
    if owner:
        raise ValueError(
            f"{provider} volume {volume} is {owner}'s, not this project's: one provider volume has one owner. "
            "Name a volume of this project's, or a new name with a size to create one"
        )
