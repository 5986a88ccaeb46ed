"""A box that bills for nothing is an alarm.

Beat looks at every billing box. A box is waste when:
- every run that ran on it is exported and verified in custody, and it still bills (its work is
  delivered: release it);
- it is running with no live run (shut it down);
- it is stopped on a platform whose stop keeps billing (vast.ai's disk, RunPod's volume at 2×,
  LanRui's data disk, Paperspace's storage and IP: release it);
- it is released, and resources registered beside it (a network volume, a filesystem, a static IP, a
  snapshot) still bill: each is deleted by its own request.

Each is told to the project once per threshold of its duration (WASTE_ALARM_MINUTES; first seen past
several, only the largest), with the hourly rate and what it billed since, and a link to the box's page
with the suggested request prefilled beside its evaluated checks. A project that opted in has the
shutdown request filed in the name of the person who opted it in (another person approves it); a
release, which loses disks, is always a person's request. Alarms are rows under a unique constraint:
two beat ticks (or two workers) racing raise one.
"""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from custody.models import CustodyRecord, CustodyStatus
from delivery.models import TeardownKind, WasteAlarm, WasteKind
from fleet.costs import accrued_cost, burn_rate, cost_between
from fleet.models import MAY_BE_ON, Instance, InstanceEvent, InstanceState, Resource
from notifications.actions import do_notify
from notifications.models import Event
from runs.models import LIVE_STATES, RunState


@dataclass(frozen=True)
class Waste:
    kind: str
    since: datetime
    suggested: str  # a TeardownKind, or STOP_RUN
    why: str
    thresholds: tuple[int, ...] = ()  # minutes since `since` it is told at; () = WASTE_ALARM_MINUTES
    link: str = ""  # where the suggested step is taken; "" = the box's page, the request prefilled


STOP_RUN = "stop_run"  # an idle GPU's suggestion: the run is stopped on its page, the box stays


def gpu_idle_of(instance, runs: list) -> Waste | None:
    """A live run whose every GPU has been under its project's threshold for the project's window: it
    bills the GPU rate for nothing (a data loader stuck, a deadlock, a sleep). Told from the window on,
    then at each later waste threshold, with a stop of the run suggested (watching/gpu_samples.py)."""
    window = instance.project.gpu_idle_minutes
    idle = [run for run in runs if run.state in LIVE_STATES and run.gpu_idle_since is not None]
    if not idle or instance.project.gpu_idle_percent == 0:
        return None
    run = min(idle, key=lambda run: run.gpu_idle_since)
    gpus = ", ".join(map(str, run.gpus))
    why = (
        f"run {run.run_id}'s GPU {gpus} stayed under {instance.project.gpu_idle_percent} % utilisation "
        f"since {run.gpu_idle_since:%Y-%m-%d %H:%M} UTC"
    )
    later = tuple(minutes for minutes in settings.WASTE_ALARM_MINUTES if minutes > window)
    link = f"{settings.SITE_URL}{run.get_absolute_url()}#stop"
    return Waste(WasteKind.GPU_IDLE, run.gpu_idle_since, STOP_RUN, why, (window, *later), link)


def waste_of(instance, runs: list, verified_at: dict[int, datetime]) -> Waste | None:
    """What the box bills for nothing now, or None. runs: the runs on it (state, state_changed_at);
    verified_at: run pk → when custody last verified it."""
    ran = [run for run in runs if run.state != RunState.DRAFT]
    if not bills_money(instance):
        return None
    if any(run.state in LIVE_STATES for run in ran):
        return gpu_idle_of(instance, ran)
    stopped_bills = instance.state == InstanceState.STOPPED and (
        instance.profile.stopped_bills or instance.rate_stopped > 0
    )
    bills = instance.state in MAY_BE_ON or stopped_bills
    if ran and bills and all(run.state == RunState.EXPORTED and run.pk in verified_at for run in ran):
        why = f"every run on it ({len(ran)}) is exported and verified in custody, and it still bills"
        return Waste(WasteKind.VERIFIED, max(verified_at[run.pk] for run in ran), TeardownKind.RELEASE, why)
    state_since = accrued_cost(instance).state_since
    if instance.state == InstanceState.RUNNING:
        ended = [run.state_changed_at for run in ran if run.state_changed_at]
        since = max([state_since, *ended])
        has_stop = instance.profile.data["teardown"]["shutdown"]["via"] != "none"
        suggested = TeardownKind.SHUTDOWN if has_stop else TeardownKind.RELEASE
        return Waste(WasteKind.IDLE, since, suggested, "it is running with no live run")
    if stopped_bills:
        effect = instance.profile.data["billing"]["stop_effect"]
        why = f"it is stopped, and a stopped {instance.profile.name} box still bills ({effect})"
        return Waste(WasteKind.STOPPED, state_since, TeardownKind.RELEASE, why)
    return None


def bills_money(instance) -> bool:
    """A rented or cloud box bills whatever rate we know; the control host never does, and an SSH box
    (a workstation, a lab machine) only where a person set a rate for it."""
    kind = instance.profile.kind
    if kind == "local":
        return False
    return kind != "ssh" or instance.rate_running > 0 or instance.rate_stopped > 0


def threshold_due(minutes: float, thresholds: list[int]) -> int | None:
    """The largest threshold the waste has lasted past; None before the first."""
    past = [threshold for threshold in thresholds if minutes >= threshold]
    return max(past) if past else None


def do_raise_waste_alarms(now=None) -> list[int]:
    """Beat: the alarms raised this tick (their ids); opted-in projects get their shutdown request filed."""
    now = now or timezone.now()
    raised = []
    boxes = Instance.objects.billing().select_related("project", "project__waste_shutdown_by")
    verified = dict(
        CustodyRecord.objects.filter(status=CustodyStatus.VERIFIED, run__instance__in=boxes)
        .values("run_id")
        .annotate(at=Max("verified_at"))
        .values_list("run_id", "at")
    )
    for instance in boxes.prefetch_related("runs").with_state_events():
        runs = list(instance.runs.all())
        waste = waste_of(instance, runs, {run.pk: verified[run.pk] for run in runs if run.pk in verified})
        alarm = _alarm(instance, waste, now)
        if alarm is not None:
            raised.append(alarm.pk)
        elif waste is not None:  # told already: a filing a killed worker left undone is done now
            alarm = WasteAlarm.objects.filter(instance=instance, kind=waste.kind, since=waste.since).first()
        if alarm is not None:
            _file_shutdown(instance, alarm)
    left = Resource.objects.filter(deleted_at__isnull=True, rate__gt=0, instance__state=InstanceState.RELEASED)
    released = Instance.objects.filter(pk__in=left.values("instance_id")).select_related("project")
    for instance in released.prefetch_related("resources").with_state_events():
        alarm = _alarm(instance, resources_left(instance), now)
        raised += [alarm.pk] if alarm is not None else []
    return raised


def resources_left(instance) -> Waste | None:
    """A released box's registered resources that still bill: from its release, each by its own request."""
    left = [r for r in instance.resources.all() if r.deleted_at is None and r.rate > 0]
    if instance.state != InstanceState.RELEASED or not left:
        return None
    names = ", ".join(f"{r.facts.label} {r.name}" for r in left)
    why = f"it is released and {names} still bill{'s' if len(left) == 1 else ''} until deleted"
    return Waste(WasteKind.RESOURCES, accrued_cost(instance).state_since, TeardownKind.DELETE_RESOURCE, why)


def _alarm(instance, waste: Waste | None, now) -> WasteAlarm | None:
    if waste is None:
        return None
    threshold = threshold_due(
        (now - waste.since).total_seconds() / 60, waste.thresholds or settings.WASTE_ALARM_MINUTES
    )
    return None if threshold is None else _raise(instance, waste, threshold, now)


def _costs(instance, waste: Waste, now) -> tuple[Decimal, Decimal]:
    """($/h now, what it billed since the waste began): the box's own, or its resources' left billing."""
    if waste.kind != WasteKind.RESOURCES:
        return burn_rate(instance), cost_between(instance, waste.since, now).quantize(Decimal("0.01"))
    left = [r for r in instance.resources.all() if r.deleted_at is None]
    accrued = sum((r.cost_between(waste.since, now) for r in left), Decimal(0))
    return sum((r.rate for r in left), Decimal(0)), accrued.quantize(Decimal("0.01"))


def page_link(alarm: WasteAlarm) -> str:
    """The box's page with the suggested request prefilled beside its evaluated checks."""
    return f"{settings.SITE_URL}/instances/{alarm.instance_id}/?waste={alarm.pk}#consequence-{alarm.suggested}"


def _raise(instance, waste: Waste, threshold: int, now) -> WasteAlarm | None:
    covered = WasteAlarm.objects.filter(
        instance=instance, kind=waste.kind, since=waste.since, threshold_minutes__gte=threshold
    )
    if covered.exists():
        return None
    hourly, accrued = _costs(instance, waste, now)
    rate = f"${hourly:.2f}/h" if hourly else "an hourly rate nobody set on the box"
    hours = (now - waste.since).total_seconds() / 3600
    step = "stop the run" if waste.suggested == STOP_RUN else TeardownKind(waste.suggested).label.lower()
    text = (
        f"{instance.name} bills for nothing: {waste.why}, for {hours:.1f} h (${accrued} at {rate}). Suggested: {step}."
    )
    try:
        with transaction.atomic(durable=True):
            alarm = WasteAlarm.objects.create(
                instance=instance,
                kind=waste.kind,
                since=waste.since,
                threshold_minutes=threshold,
                hourly=hourly,
                accrued=accrued,
                suggested=waste.suggested,
                message=text,
            )
            data = {"alarm": alarm.pk, "kind": waste.kind, "threshold_minutes": threshold}
            InstanceEvent.objects.create(instance=instance, kind=InstanceEvent.Kind.WASTE, message=text, data=data)
            details = {
                "instance": instance.name,
                "kind": waste.kind,
                "since": waste.since.isoformat(),
                "threshold_minutes": threshold,
                "hourly": str(hourly),
                "accrued": str(accrued),
                "suggested": waste.suggested,
                "link": waste.link or page_link(alarm),
            }
            do_notify(instance.project_id, Event.WASTE, f"waste: {instance.name}", f"{text} {details['link']}", details)
    except IntegrityError:
        return None  # another tick raised it first
    return alarm


def _file_shutdown(instance, alarm: WasteAlarm) -> None:
    """The project's opt-in: the shutdown request filed in the name of whoever opted it in (a release
    stays a person's request). A refusal (one already open, a check that fails) is said on the box."""
    from delivery.actions.base import TeardownRefused
    from delivery.actions.requests import do_file_teardown

    person = instance.project.waste_shutdown_by
    if person is None or alarm.kind in (WasteKind.STOPPED, WasteKind.GPU_IDLE) or instance.state not in MAY_BE_ON:
        return
    if instance.profile.data["teardown"]["shutdown"]["via"] == "none":  # Lambda: no stop, only a release
        return
    episode = WasteAlarm.objects.filter(instance=instance, kind=alarm.kind, since=alarm.since)
    if episode.filter(request__isnull=False).exists():
        return  # filed at an earlier threshold of this episode
    if InstanceEvent.objects.filter(instance=instance, kind=InstanceEvent.Kind.WASTE, data__refused=alarm.pk).exists():
        return  # refused at this threshold already (said on the box): the next threshold asks again
    reason = f"Filed by RemoteGPU for the project's setting (opted in by {person}): {alarm.message}"
    try:
        request = do_file_teardown(instance.pk, TeardownKind.SHUTDOWN, reason, actor=person)
    except TeardownRefused as exc:
        InstanceEvent.objects.create(
            instance=instance,
            kind=InstanceEvent.Kind.WASTE,
            message=f"The automatic shutdown request was not filed: {' '.join(exc.messages)}",
            data={"alarm": alarm.pk, "refused": alarm.pk},
        )
        return
    WasteAlarm.objects.filter(pk=alarm.pk).update(request=request)


def do_set_waste_shutdown(project_pk: int, on: bool, *, actor) -> None:
    """Opt the project in (in actor's name) or out of filing shutdown requests for waste; audited."""
    from core.audit import record
    from core.models import AuditAction
    from projects.models import Project
    from projects.roles import require

    with transaction.atomic(durable=True):
        project = Project.objects.select_for_update(no_key=True).get(pk=project_pk)
        require(actor, "projects.operate", project)
        project.waste_shutdown_by = actor if on else None
        project.save(update_fields=["waste_shutdown_by"])
        said = "files" if on else "no longer files"
        message = f"A box that bills for nothing {said} its shutdown request automatically (set by {actor})"
        record(AuditAction.WASTE_SHUTDOWN_SET, message, actor=actor, project=project, after=on)
