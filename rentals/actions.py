"""A rent's state changes: one durable transaction each, the row locked, an audit entry, the next task
enqueued on commit. The provider calls themselves happen in tasks.py → creating.py, outside any lock."""

import datetime as dt
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from core.audit import record
from core.enqueue import after_commit
from core.models import AuditAction
from fleet.actions import do_confirm_host_key, register_instance, register_resource
from fleet.control_host import runs_here_problem
from fleet.models import Instance, InstanceProbe, InstanceState, PlatformAcknowledgement, ProviderKeyUse
from fleet.naming import suggest_name
from notifications.actions import do_notify
from notifications.models import Event
from platforms.catalog import get_profile
from projects.roles import require, require_second_approver
from providers import renting_of
from rentals.asking import expected_cost, run_signature, spend_note
from rentals.models import RENTAL_TRANSITIONS, Rental, RentalAttempt, RentalState
from runs import spend
from runs.actions.base import control_host_problem
from runs.actions.lifecycle import do_edit_run, do_start_preflight


def move(rental: Rental, target: RentalState) -> None:
    RENTAL_TRANSITIONS.check(rental.state, target, f"Rent #{rental.pk}")
    rental.state, rental.changed_at = target, timezone.now()


def _lock(rental_pk: int) -> Rental:
    return Rental.objects.select_for_update(of=("self",)).select_related("project").get(pk=rental_pk)


def _tell(rental: Rental, headline: str, awaits_approval: bool = False) -> None:
    url = f"{settings.SITE_URL}{rental.get_absolute_url()}"
    text = f"Rent #{rental.pk} {rental.name} ({rental.project.name}): {headline}\n{url}"
    data = {"rental": rental.pk, "name": rental.name, "state": rental.state, "url": url}
    if awaits_approval:
        data.update(awaits_approval=True, asked_by=rental.requester_id)
    do_notify(rental.project_id, Event.RENT, f"rent {rental.name}: {headline}"[:160], text, data)


def do_request_rental(rental: Rental, *, actor) -> Rental:
    """Save a validated rent (rentals/forms.py) as waiting for an approver: never its requester. Its run's
    proof runs the run's command on the proving box: on the control host, only an administrator's."""
    require(actor, "projects.operate", rental.project)
    if rental.proving_box is not None and rental.proving_box.profile.is_local:
        problem = control_host_problem(rental.run, actor) if rental.run_id else runs_here_problem(actor)
        if problem:
            raise PermissionDenied(problem)
    with transaction.atomic(durable=True):
        project = rental.project
        rental.requester = actor
        rental.expected_cost = expected_cost(rental.max_rate, rental.expected_minutes)
        envelope = spend.envelope_of(project) if project.budget is not None else None
        rental.spend_note = spend_note(rental.expected_cost, project.run_cost_threshold, envelope and envelope.left)
        rental.expires_at = timezone.now() + timedelta(hours=settings.SPEND_APPROVAL_HOURS)
        rental.name = "pending"
        rental.save()
        # The naming rule, with the rent's number in the purpose: two rents of a day never share a name,
        # and the name is how a retried create finds the box it may already have made.
        rental.name = suggest_name(project.slug, f"{rental.purpose}-r{rental.pk}", dt.date.today())
        if rental.run_id is not None:  # proven where no GPU bills before anyone is asked to pay for it
            rental.state = RentalState.PROVING
        rental.save(update_fields=["name", "state"])
        message = f"rent #{rental.pk} {rental.name} asked: at most ${rental.expected_cost}, {rental.spend_note}"
        record(AuditAction.RENT_ASKED, message, actor=actor, project=project, rental=rental.pk)
        if rental.state == RentalState.PROVING:
            after_commit("rentals.tasks.prove_rental", rental.pk)
        else:
            _ask_approver(rental)
    return rental


def _ask_approver(rental: Rental) -> None:
    said = f"waits for an approver: at most ${rental.expected_cost}, {rental.spend_note}"
    _tell(rental, said, awaits_approval=True)


def do_claim_proof(rental_pk: int) -> Rental | None:
    """A worker takes a rent's proof; None when it is done or another worker holds it (a redelivery)."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        rental = _lock(rental_pk)
        lease = now - timedelta(seconds=settings.RENT_PROVE_SECONDS)
        if rental.state != RentalState.PROVING or (rental.claimed_at is not None and rental.claimed_at > lease):
            return None
        rental.claimed_at = now
        rental.save(update_fields=["claimed_at"])
    return rental


def do_finish_proof(rental_pk: int, proof: dict) -> Rental | None:
    """The run's proof, kept on the rent: passed, it waits for an approver (its deadline counts from now);
    failed, nothing is created and the reason names what failed and where."""
    with transaction.atomic(durable=True):
        rental = _lock(rental_pk)
        if rental.state != RentalState.PROVING:
            return None
        rental.proof = proof
        if proof["passed"]:
            move(rental, RentalState.REQUESTED)
            rental.expires_at = timezone.now() + timedelta(hours=settings.SPEND_APPROVAL_HOURS)
            rental.save()
            said = f"rent #{rental.pk} {rental.name}: its run passed its checks and CPU smoke on {proof['box']}"
            record(AuditAction.RENT_ATTEMPT, said, project=rental.project, rental=rental.pk)
            _ask_approver(rental)
            return rental
        rental.save(update_fields=["proof"])
    reason = (
        f"the run failed its proof on {proof['box']} before anything was rented: {proof['why']}. Nothing was "
        "created: fix the run and ask again."
    )
    return do_fail_rental(rental_pk, reason)


def do_decide_rental(rental_pk: int, approve: bool, comment: str, *, actor) -> Rental:
    """An approver of the project, never the requester, approves the spend (creation starts) or refuses."""

    with transaction.atomic(durable=True):
        rental = _lock(rental_pk)
        require_second_approver(actor, rental.project, rental.requester_id, "its rents", "a rent")
        if rental.state != RentalState.REQUESTED:
            raise ValidationError(f"Rent #{rental.pk} is {rental.get_state_display().lower()}.")
        if rental.expires_at <= timezone.now():
            raise ValidationError(f"Rent #{rental.pk} has expired; ask again.")
        stale = approve and _proof_is_stale(rental, actor)
        if not stale:
            _decide(rental, approve, comment, actor)
    if stale:
        raise ValidationError(
            f"Rent #{rental.pk}'s run changed since its proof: it is being proven again, and waits for an approver "
            "once it passes. Nothing was approved."
        )
    return rental


def _proof_is_stale(rental: Rental, actor) -> bool:
    """The draft run was edited since its proof: the rent goes back to proving (nothing approved)."""
    if rental.run_id is None or rental.proof.get("run_signature") == run_signature(rental.run):
        return False
    move(rental, RentalState.PROVING)
    rental.claimed_at = None  # a new proof, whoever took the last one
    rental.save()
    message = f"rent #{rental.pk} {rental.name}: its run changed since its proof; proven again before approval"
    record(AuditAction.RENT_ATTEMPT, message, actor=actor, project=rental.project, rental=rental.pk)
    after_commit("rentals.tasks.prove_rental", rental.pk)
    return True


def _decide(rental: Rental, approve: bool, comment: str, actor) -> None:
    move(rental, RentalState.APPROVED if approve else RentalState.REJECTED)
    rental.approver, rental.comment = actor, comment.strip()[:2000]
    rental.save()
    verdict = "approved" if approve else "rejected"
    action = AuditAction.RENT_APPROVED if approve else AuditAction.RENT_REJECTED
    message = f"rent #{rental.pk} {rental.name} (at most ${rental.expected_cost}) {verdict}: {rental.comment}"
    record(action, message, actor=actor, project=rental.project, rental=rental.pk)
    _tell(rental, f"{verdict} by {actor.get_username()}")
    if approve:
        after_commit("rentals.tasks.create_rental", rental.pk)


def do_cancel_rental(rental_pk: int, *, actor) -> Rental:
    """Its requester or an approver withdraws a rent nobody has decided yet."""
    with transaction.atomic(durable=True):
        rental = _lock(rental_pk)
        if rental.requester_id != actor.pk and not actor.has_perm("projects.approve_cost", rental.project):
            raise PermissionDenied("Only the requester or an approver cancels a rent.")
        move(rental, RentalState.CANCELLED)
        rental.save()
        message = f"rent #{rental.pk} {rental.name} cancelled"
        record(AuditAction.RENT_CANCELLED, message, actor=actor, project=rental.project, rental=rental.pk)
    return rental


def do_claim_rental(rental_pk: int) -> Rental | None:
    """A worker takes an approved rent (or re-takes one left creating); None when there is nothing to do."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        rental = _lock(rental_pk)
        lease = now - timedelta(seconds=settings.RENT_CREATE_SECONDS)
        held = rental.claimed_at is not None and rental.claimed_at > lease
        if rental.state == RentalState.APPROVED:
            move(rental, RentalState.CREATING)
        elif rental.state == RentalState.CREATING and not held:
            rental.changed_at = now  # a re-drive: its deadline counts again
        else:
            return None  # done, or another worker is creating it now (a message delivered twice)
        rental.claimed_at = now
        rental.save(update_fields=["state", "changed_at", "claimed_at"])
    return rental


def do_record_attempt(rental_pk: int, provider: str, outcome: str, offer: dict, provider_id: str, detail: str):
    """One candidate asked, audited; a SENT row is written before the create call, in its own commit."""
    with transaction.atomic(durable=True):
        rental = _lock(rental_pk)
        if rental.state != RentalState.CREATING:
            return None
        attempt = RentalAttempt.objects.create(
            rental=rental, provider=provider, outcome=outcome, offer=offer, provider_id=provider_id, detail=detail
        )
        if outcome == RentalAttempt.Outcome.SENT:  # from here a box may bill under this key: reconcile it
            ProviderKeyUse.objects.get_or_create(profile_key=provider, credential_id=rental.api_credentials[provider])
        rental.changed_at = rental.claimed_at = timezone.now()  # progress: the claim holds on
        rental.save(update_fields=["changed_at", "claimed_at"])
        offered = f" ({offer['describe']})" if offer.get("describe") else ""
        said = f"rent #{rental.pk} {rental.name}: {provider} {attempt.get_outcome_display().lower()}{offered}"
        message = said + (f": {detail}" if detail else "")
        record(AuditAction.RENT_ATTEMPT, message[:2000], project=rental.project, rental=rental.pk, provider=provider)
    return attempt


def do_record_volume(rental_pk: int, provider: str, volume: dict, how: str) -> Rental | None:
    """The rent's volume as its provider lists it (found, or created: from here it bills, and drift lists
    it under the key if the rent goes no further); audited beside the candidates asked."""
    with transaction.atomic(durable=True):
        rental = _lock(rental_pk)
        if rental.state != RentalState.CREATING:
            return None
        rental.volume = {**volume, "how": how}
        rental.changed_at = rental.claimed_at = timezone.now()  # progress: the claim holds on
        rental.save(update_fields=["volume", "changed_at", "claimed_at"])
        ProviderKeyUse.objects.get_or_create(profile_key=provider, credential_id=rental.api_credentials[provider])
        message = f"rent #{rental.pk} {rental.name}: {provider} volume {volume['name']} ({volume['id']}) {how}"
        record(AuditAction.RENT_ATTEMPT, message, project=rental.project, rental=rental.pk, provider=provider)
    return rental


def do_mark_created(rental_pk: int, provider: str, provider_id: str, offer: dict) -> Rental | None:
    """The provider made the box: from here it bills; it is polled until it runs (its key is reconciled
    since the create was sent)."""

    with transaction.atomic(durable=True):
        rental = _lock(rental_pk)
        if rental.state != RentalState.CREATING:
            return None
        move(rental, RentalState.BOOTING)
        rental.provider, rental.provider_id, rental.offer = provider, provider_id, offer
        rental.save()
        message = f"rent #{rental.pk} {rental.name}: {provider} created {provider_id} ({offer.get('describe', '')})"
        record(AuditAction.RENT_CREATED, message, project=rental.project, rental=rental.pk, provider=provider)
        after_commit("rentals.tasks.poll_rental", rental.pk)
    return rental


def do_fail_rental(rental_pk: int, reason: str) -> Rental | None:
    """Failed with its reason and next step; told to the project."""
    with transaction.atomic(durable=True):
        rental = _lock(rental_pk)
        if not RENTAL_TRANSITIONS.allows(rental.state, RentalState.FAILED):
            return None
        move(rental, RentalState.FAILED)
        rental.reason = reason[:2000]
        rental.save()
        record(
            AuditAction.RENT_FAILED,
            f"rent #{rental.pk} {rental.name} failed: {reason}"[:2000],
            rental=rental.pk,
            project=rental.project,
        )
        _tell(rental, f"failed: {reason}"[:300])
    return rental


def do_register_rental(rental_pk: int, host: str, port: int) -> Rental | None:
    """The box runs and answers on host:port: it becomes an instance of the project, with the rent's API
    key and SSH key; its host key is scanned by a probe and waits for a person (never trusted silently)."""
    with transaction.atomic(durable=True):
        rental = _lock(rental_pk)
        if rental.state != RentalState.BOOTING:
            return None
        instance = _instance_of(rental, host, port)
        PlatformAcknowledgement.objects.get_or_create(
            project=rental.project, profile_key=rental.provider, defaults={"user": rental.requester}
        )
        register_instance(instance, f" by rent #{rental.pk}", actor=rental.requester)
        _register_volume(rental, instance)
        move(rental, RentalState.REGISTERED)
        rental.instance = instance
        rental.save()
        _tell(rental, f"registered as {instance.name}: confirm its host key on the rent's page")
        after_commit("fleet.tasks.probe_instance", instance.pk, InstanceProbe.Kind.LIGHT, InstanceProbe.Trigger.BUTTON)
    return rental


def _instance_of(rental: Rental, host: str, port: int) -> Instance:
    profile = get_profile(rental.provider)
    instance = Instance(
        name=rental.name,
        project=rental.project,
        profile_key=rental.provider,
        host=host,
        port=port,
        user=rental.ssh_user or profile.data["network"].get("ssh_user") or "root",
        credential=rental.ssh_credential,
        api_credential_id=rental.api_credentials[rental.provider],
        provider_id=rental.provider_id,
        gpu_description=str(rental.offer.get("describe", ""))[:120],
        region=str(rental.offer.get("region") or "")[:60],
        durable_volume=str((rental.volume or {}).get("id") or rental.durable_volume)[:120],
        mirror_root=volume_root(rental),
        image=rental.image[:200],
        rate_running=Decimal(str(rental.offer.get("rate", 0))).quantize(Decimal("0.0001")),
        # What it bills stopped (vast.ai's disk), priced with the offer: the numbers the rent approved.
        rate_stopped=Decimal(str(rental.offer.get("rate_stopped") or 0)).quantize(Decimal("0.0001")),
        state=InstanceState.RUNNING,
    )
    instance.full_clean(exclude=["credential", "api_credential", "created_by"])
    return instance


def volume_root(rental: Rental) -> str:
    """Where the rent's volume is mounted on its box: the box's durable mirror root ("": the profile's)."""
    if not rental.durable_volume:
        return ""
    template = renting_of(rental.provider).volume_root
    return template.format(name=(rental.volume or {}).get("name") or rental.durable_volume)


def _register_volume(rental: Rental, instance: Instance) -> None:
    """A volume the rent created bills beside its box: registered there in the box's own commit, so spend
    counts it and its deletion is a request of its own once the box is released (one it found is the
    person's already). A registration refused is said on the rent's audit; the box is registered anyway."""
    volume = rental.volume or {}
    if volume.get("how") != "created":
        return
    tier = instance.profile.tier_of(instance.mirror_root or "")["name"]
    tier = tier if any(t["name"] == tier for t in instance.profile.tiers) else ""
    rate = Decimal(str(volume.get("rate") or 0)).quantize(Decimal("0.0001"))
    try:
        with transaction.atomic():  # a savepoint: a refusal undoes only the volume's row
            register_resource(
                instance, volume["kind"], volume["name"], tier, rate, volume["id"], actor=rental.requester
            )
    except ValidationError as exc:
        message = f"rent #{rental.pk}: volume not registered: {' '.join(exc.messages)}"
        record(AuditAction.RENT_ATTEMPT, message, project=rental.project, rental=rental.pk)


def do_confirm_rental(rental_pk: int, fingerprint: str, *, actor) -> Rental:
    """A person confirms the host key they were shown: the key is pinned, the rent is ready, and a run it
    was asked for moves onto the box and starts its preflight."""
    rental = Rental.objects.select_related("project", "run").get(pk=rental_pk)
    require(actor, "projects.operate", rental.project)
    if rental.state != RentalState.REGISTERED:
        raise ValidationError(f"Rent #{rental.pk} is {rental.get_state_display().lower()}.")
    instance = rental.instance
    if instance.pinned_host_key is None:
        do_confirm_host_key(instance.pk, fingerprint, actor=actor)
    with transaction.atomic(durable=True):
        rental = _lock(rental_pk)
        if rental.state != RentalState.REGISTERED:
            return rental  # confirmed twice at once: the other one continued
        move(rental, RentalState.READY)
        rental.save()
    if rental.run_id is not None and rental.run.state == "draft":
        do_edit_run(rental.run_id, {"instance": instance}, actor=actor)
        do_start_preflight(rental.run_id, actor=actor)
    return rental
