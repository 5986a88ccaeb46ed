import re
import shlex

import yaml
from django import forms
from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.utils import timezone

from fleet.actions import needs_acknowledgement
from fleet.credentials import reference_problem
from fleet.models import Credential, CredentialKind, Instance, InstanceState
from fleet.naming import name_problem, purpose_guess, suggest_name
from platforms import catalog
from platforms.hooks import ENV_NAME, HOOK_LIMIT, HookError, check_overrides, parse_overrides
from platforms.hosts import valid_host
from projects.models import Project, Role

USER = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")


SAFE_PATH = re.compile(r"[A-Za-z0-9_./$~+-]+")


class HooksField(forms.CharField):
    """An instance's hook overrides as YAML in the form, a checked mapping in the model (platforms/hooks.py)."""

    widget = forms.Textarea(attrs={"rows": 4, "spellcheck": "false"})

    def prepare_value(self, value):
        if isinstance(value, dict):
            return yaml.safe_dump(value, sort_keys=False, allow_unicode=True) if value else ""
        return value

    def to_python(self, value):
        if isinstance(value, dict):
            return check_overrides(value)
        try:
            return parse_overrides(super().to_python(value) or "")
        except HookError as exc:
            raise forms.ValidationError(str(exc)) from None


class InstanceForm(forms.ModelForm):
    profile_key = forms.ChoiceField(label="Platform", choices=())
    port = forms.IntegerField(initial=22, validators=[MinValueValidator(1), MaxValueValidator(65535)])
    rate_running = forms.DecimalField(min_value=0, max_digits=10, decimal_places=4, initial=0)
    rate_stopped = forms.DecimalField(min_value=0, max_digits=10, decimal_places=4, initial=0)
    acknowledge = forms.BooleanField(
        required=False,
        label="I have read this platform's conveniences and danger clocks",
    )
    hooks = HooksField(
        label="Hook overrides",
        required=False,
        max_length=HOOK_LIMIT,
        help_text="YAML over the platform's hooks, e.g. interpreter: /opt/venv/bin/python, or env: {HF_ENDPOINT: "
        "https://hf-mirror.com}, or proxy: {source: /etc/network_turbo, exports: {}, unset: [http_proxy], note: …}",
    )

    class Meta:
        model = Instance
        fields = [
            "project",
            "name",
            "profile_key",
            "host",
            "port",
            "user",
            "credential",
            "gpu_description",
            "data_root_override",
            "data_tier",
            "mirror_root",
            "mirror_tier",
            "region",
            "durable_volume",
            "image",
            "provider_id",
            "api_credential",
            "shutdown_command",
            "rate_running",
            "rate_stopped",
            "stops_at",
            "hooks",
        ]
        widgets = {"stops_at": forms.DateTimeInput(attrs={"type": "datetime-local"})}

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        if "project" in self.fields:  # registration; an edit keeps the box's identity
            self.fields["profile_key"].choices = [("", "—")] + [
                (key, name)
                for key, name in catalog.choices()
                if settings.LOCAL_NODE or not catalog.get_profile(key).is_local
            ]
            self.fields["project"].queryset = Project.objects.where_role(user, Role.OPERATOR)
        # Names only: where a credential lives on the workers is for administrators.
        usable = Credential.objects.usable_by(user) if user else Credential.objects.none()
        self.fields["credential"].queryset = usable.of_kind(CredentialKind.SSH_KEY)
        self.fields["api_credential"].queryset = usable.of_kind(CredentialKind.PROVIDER_KEY)
        if "name" in self.fields:
            self.fields["name"].help_text = "<project>-<purpose>-<yyyymmdd>, e.g. vision-vitb-20261129"

    @property
    def profile(self):
        key = self.cleaned_data.get("profile_key") if hasattr(self, "cleaned_data") else None
        return catalog.get_profile(key) if key else None

    def clean_host(self):
        host = self.cleaned_data["host"].strip()
        if host and not valid_host(host):
            raise forms.ValidationError("A host is a DNS name or an IP address (no spaces, no leading '-').")
        return host

    def clean_user(self):
        user = self.cleaned_data["user"].strip()
        if user and not USER.fullmatch(user):
            raise forms.ValidationError("A user name is lowercase letters, digits, '_', '.', '-'.")
        return user

    def _node_root(self, field: str) -> str:
        root = self.cleaned_data[field].strip()
        if root and not (root.startswith(("/", "$HOME/", "~/")) and SAFE_PATH.fullmatch(root) and ".." not in root):
            raise forms.ValidationError("An absolute path on the box (or under $HOME/), without '..' or spaces.")
        return root

    def clean_mirror_root(self):
        return self._node_root("mirror_root")

    def clean_data_root_override(self):
        return self._node_root("data_root_override")

    def clean_provider_id(self):
        value = self.cleaned_data["provider_id"].strip()
        if value and not re.fullmatch(r"[A-Za-z0-9_.:-]{1,100}", value):
            raise forms.ValidationError("A provider id is letters, digits, '_', '.', ':' and '-'.")
        return value

    def clean_shutdown_command(self):
        value = self.cleaned_data["shutdown_command"].strip()
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise forms.ValidationError(f"Not a valid command line: {exc}.") from None
        if value and (not argv or re.search(r"[\x00-\x1f]", value)):
            raise forms.ValidationError("One command line, without control characters.")
        return value

    def clean(self):
        data = super().clean()
        project, profile = data.get("project"), self.profile
        name = data.get("name")
        if project and name:
            problem = name_problem(name, project.slug)
            if problem:
                suggestion = suggest_name(project.slug, purpose_guess(name, project.slug), timezone.localdate())
                self.add_error("name", f"{problem} Suggested: {suggestion}")
        if profile is None:
            return data
        if profile.is_local and not (self.user and self.user.is_superuser):
            # Its commands run on the control host itself, beside the database and every secret.
            self.add_error(
                "profile_key" if "profile_key" in self.fields else None,
                "The local workstation runs commands on the control host: only an administrator may register it.",
            )
            return data
        if profile.data["teardown"]["shutdown"]["via"] == "ssh" and not data.get("shutdown_command"):
            self.add_error(
                "shutdown_command",
                f"A {profile.name} shutdown powers off the real machine: write the command it runs "
                "(for example sudo -n shutdown -h now, or a command that only stops your job).",
            )
        for field in ("data_tier", "mirror_tier"):
            if data.get(field) and not profile.tier_named(data[field]):
                names = ", ".join(tier["name"] for tier in profile.tiers)
                self.add_error(field, f"{profile.name}'s storage tiers are: {names}.")
        if not profile.is_local:
            if not data.get("user") and profile.default_user:
                data["user"] = profile.default_user
            for field in ("host", "user", "credential"):
                if not data.get(field) and field not in self.errors:
                    self.add_error(field, f"{profile.name} is reached over SSH: this is required.")
        if project:
            self._check_grants(data, project)
        if project and needs_acknowledgement(project, profile.key) and not data.get("acknowledge"):
            self.add_error(
                "acknowledge", f"First {profile.box_name} in {project.name}: read the platform's notes above first."
            )
        return data

    def _check_grants(self, data, project) -> None:
        """A credential is usable only where an administrator granted it."""
        for field in ("credential", "api_credential"):
            credential = data.get(field)
            if credential and not credential.granted_to(project.pk):
                self.add_error(
                    field,
                    f"{credential} is not granted to {project.name}; an administrator grants it "
                    "on the Credentials page.",
                )


class StateForm(forms.Form):
    state = forms.ChoiceField(choices=InstanceState.choices)
    reason = forms.CharField(max_length=200, required=False)


class CredentialForm(forms.ModelForm):
    """An administrator registers where a secret lives on the workers, and which projects may use it."""

    projects = forms.ModelMultipleChoiceField(
        queryset=Project.objects.order_by("name"), required=False, widget=forms.CheckboxSelectMultiple
    )

    class Meta:
        model = Credential
        fields = ["name", "kind", "reference", "export_as", "projects", "note"]

    def clean_reference(self):
        reference = self.cleaned_data["reference"]
        problem = reference_problem(reference)
        if problem:
            # Never render pasted key material back into the page.
            self.data = self.data.copy()
            self.data[self.add_prefix("reference")] = ""
            raise forms.ValidationError(problem)
        return reference.strip()

    def clean(self):
        data = super().clean()
        reference = data.get("reference") or ""
        if data.get("kind") == CredentialKind.PROVIDER_KEY and reference and not reference.startswith("env:"):
            self.add_error("reference", "A provider API key is read from an environment variable: env:NAME.")
        if data.get("kind") == CredentialKind.RUN_SECRET and reference and not reference.startswith("env:"):
            self.add_error("reference", "A run secret is read from an environment variable on the workers: env:NAME.")
        export_as = (data.get("export_as") or "").strip()
        if export_as and data.get("kind") != CredentialKind.RUN_SECRET:
            self.add_error("export_as", "Only a run secret is exported to a run's command.")
        elif export_as and (not ENV_NAME.fullmatch(export_as) or export_as.startswith("REMOTEGPU_")):
            self.add_error("export_as", "An environment variable name: letters, digits and _, not REMOTEGPU_*.")
        data["export_as"] = export_as
        return data


class InstanceEditForm(InstanceForm):
    """What an operator may change on a registered box: where and how it is reached, its money and its
    power-off command. Its project, name and platform are its identity (a new box is a new instance)."""

    class Meta(InstanceForm.Meta):
        fields = [field for field in InstanceForm.Meta.fields if field not in ("project", "name", "profile_key")]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for field in ("project", "name", "profile_key", "acknowledge"):
            self.fields.pop(field, None)

    @property
    def profile(self):
        return self.instance.profile

    def clean(self):
        data = super().clean()  # it has no project field: the box's own project is checked here
        self._check_grants(data, self.instance.project)
        return data
