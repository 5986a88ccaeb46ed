"""The worker's side of a rent: ask each candidate in turn for a fitting offer and create onto it; then
wait for the box to run. Provider calls happen here, outside any lock; every result goes through an
action. A create that may have landed (a SENT attempt with no answer recorded: the worker died, the
call timed out) is never sent again blind: the provider's list is read for the rent's name first.
"""

import dataclasses

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone

from fleet.credentials import public_key_of
from fleet.models import Credential
from fleet.provider_calls import list_boxes
from fleet.renting import BoxKey, attach_key, create_box, find_by_name, find_offers, key_problem
from node.transport import CredentialError
from providers.http import ProviderError, ProviderUnreachable
from providers.interface import GONE, RUNNING
from providers.offers import Offer, choose
from rentals.actions import do_claim_rental, do_fail_rental, do_mark_created, do_record_attempt, do_register_rental
from rentals.asking import need_of
from rentals.models import Rental, RentalAttempt, RentalState
from rentals.volumes import ensure_volume

Outcome = RentalAttempt.Outcome


def _offer_data(offer: Offer) -> dict:
    return {**dataclasses.asdict(offer), "describe": offer.describe()}


def _credential(rental: Rental, provider: str) -> Credential:
    """The rent's key for provider, read at use: a grant revoked since the rent was asked stops it."""
    credential = Credential.objects.filter(pk=rental.api_credentials[provider]).first()
    if credential is None or not credential.granted_to(rental.project_id):
        raise ProviderError(f"the {provider} API key of this rent is no longer granted to its project")
    return credential


def _box_key(rental: Rental) -> BoxKey:
    """The rent's SSH key as the provider is given it (its public half, read on this worker)."""
    return BoxKey(rental.ssh_credential.name, public_key_of(rental.ssh_credential))


def _unanswered(rental: Rental) -> RentalAttempt | None:
    """The last create sent with no outcome after it: it may have landed."""
    last = rental.attempts.last()
    return last if last is not None and last.outcome == Outcome.SENT else None


def _found(rental: Rental, provider: str, offer: dict) -> bool:
    """A box a create may have made, looked for by its name: adopted (True) when listed. ProviderError
    when the provider cannot be asked (then nothing is known, and nothing more is sent)."""
    found = find_by_name(provider, _credential(rental, provider), rental.name)
    if found is None:
        return False
    do_record_attempt(rental.pk, provider, Outcome.CREATED, offer, found, "found by its name after a lost answer")
    do_mark_created(rental.pk, provider, found, offer)
    return True


def create(rental_pk: int) -> str:
    """Claim the rent and ask its candidates in order; what happened, in a word. A create sent earlier
    with no answer recorded (its worker died, its answer was lost) is looked for first: adopted when the
    provider lists it, else said and the candidates are asked again; when the provider cannot be asked,
    nothing is sent and the reconciler re-drives it later (then fails it, naming the box that may exist)."""
    rental = do_claim_rental(rental_pk)
    if rental is None:
        return "nothing to do"
    sent = _unanswered(rental)
    if sent is not None:
        try:
            if _found(rental, sent.provider, sent.offer):
                return "created"
        except ProviderError:
            return "retry later"
        detail = f"the create sent earlier left no box named {rental.name}"
        do_record_attempt(rental.pk, sent.provider, Outcome.ERROR, sent.offer, "", detail)
    try:
        key = _box_key(rental)
    except CredentialError as exc:
        do_fail_rental(rental.pk, f"{exc}. Nothing was created: fix the SSH key on this worker and ask again.")
        return "failed"
    if rental.durable_volume and not rental.volume:
        rental = _with_volume(rental)
        if rental is None:
            return "failed"
    need, cheapest_over, unreachable = need_of(rental), [], {}
    for provider in rental.candidates:
        result, over = _ask(rental, provider, need, key, unreachable)
        if result in ("created", "stopped"):
            return result
        if result == "unknown":
            return "retry later"  # a create that may have landed: never another one beside it now
        if over is not None:
            cheapest_over.append(over)
    if unreachable:
        return _outage(rental, unreachable)
    reason = "no candidate had a fitting offer with capacity at or under the max rate"
    if cheapest_over:
        best = min(cheapest_over, key=lambda offer: offer.rate)
        reason += f"; the cheapest fitting was {best.describe()} at {best.provider}"
    do_fail_rental(rental.pk, reason + ". Nothing was created: change the request and ask again.")
    return "failed"


def _outage(rental: Rental, unreachable: dict[str, str]) -> str:
    """A candidate that could not be asked may have had the fitting offer: the rent is asked again by the
    reconciler (RENT_CREATE_SECONDS, RENT_MAX_REDRIVES times), then failed as an outage, never as the
    request's fault."""
    said = "; ".join(unreachable.values())
    if rental.redrives < settings.RENT_MAX_REDRIVES:
        return "retry later"
    asked = rental.redrives + 1
    do_fail_rental(
        rental.pk,
        f"{', '.join(unreachable)} could not be asked {asked} times ({said}), and no candidate that answered had"
        " a fitting offer. Nothing was created: the request may be fine; ask again when the provider answers.",
    )
    return "failed"


def _with_volume(rental: Rental) -> Rental | None:
    """The rent with its volume's id (found or created before any box), or None: failed, with why."""
    try:
        problem = ensure_volume(rental, _credential(rental, rental.candidates[0]))
    except ProviderError as exc:  # the key is no longer granted
        problem = str(exc)
    if problem:
        do_fail_rental(rental.pk, problem + ". No box was created.")
        return None
    return Rental.objects.select_related("project", "ssh_credential").get(pk=rental.pk)


def _ask(rental: Rental, provider: str, need, key: BoxKey, unreachable: dict) -> tuple[str, Offer | None]:
    """One candidate: search, then create onto the cheapest fitting offer, where the box it makes would
    let us in with the rent's key. A provider that could not be asked is named in unreachable."""
    try:
        credential = _credential(rental, provider)
        offer, over = choose(need, find_offers(provider, credential, need))
        unreachable = key_problem(provider, credential, key) if offer is not None else None
    except ProviderError as exc:
        do_record_attempt(rental.pk, provider, Outcome.ERROR, {}, "", str(exc)[:500])
        if isinstance(exc, ProviderUnreachable):
            unreachable[provider] = str(exc)[:300]
        return "error", None
    if unreachable:
        do_record_attempt(rental.pk, provider, Outcome.ERROR, _offer_data(offer), "", unreachable)
        return "error", None
    if offer is None:
        detail = f"cheapest fitting {over.describe()}, over the max" if over else "nothing fits"
        do_record_attempt(rental.pk, provider, Outcome.NO_OFFER, {}, "", detail)
        return "no offer", over
    data = _offer_data(offer)
    if do_record_attempt(rental.pk, provider, Outcome.SENT, data, "", "") is None:
        return "stopped", None  # no longer creating (failed by the reconciler meanwhile): stop here
    idem = f"{rental.key}-{provider}"
    try:
        made = create_box(offer, credential, need, rental.name, rental.image, key, idem)
    except ProviderError:
        try:  # it may have landed: look for its name at once rather than send anything again
            return ("created" if _found(rental, provider, data) else "unknown"), None
        except ProviderError:
            return "unknown", None
    if made.provider_id is None:
        do_record_attempt(rental.pk, provider, Outcome.NO_CAPACITY, data, "", made.answer)
        return "no capacity", None
    do_record_attempt(rental.pk, provider, Outcome.CREATED, data, made.provider_id, "")
    do_mark_created(rental.pk, provider, made.provider_id, data)
    return "created", None


def poll(rental_pk: int) -> str:
    """A booting rent: registered once the provider lists it running with an SSH endpoint and holds the
    rent's key (attached now where the create could not give it); failed past RENT_BOOT_SECONDS (the box
    stays listed, so drift shows it billing under the key)."""
    rental = Rental.objects.select_related("project", "ssh_credential").get(pk=rental_pk)
    if rental.state != RentalState.BOOTING:
        return rental.state
    try:
        credential = _credential(rental, rental.provider)
        listing = list_boxes(rental.provider, credential)
    except ProviderError:
        return _boot_deadline(rental, "the provider could not be asked")
    state = listing.inventory.get(rental.provider_id)
    endpoint = listing.endpoints.get(rental.provider_id)
    if state == RUNNING and endpoint is not None:
        try:
            attach_key(rental.provider, credential, rental.provider_id, _box_key(rental))
        except (ProviderError, CredentialError) as exc:
            return _boot_deadline(rental, f"the SSH key is not on it yet: {exc}")
        try:
            do_register_rental(rental.pk, *endpoint)
        except ValidationError as exc:  # its name or its provider id is another box's now
            said = " ".join(exc.messages)
            reason = (
                f"{rental.provider} created {rental.provider_id} and it runs, but it could not be registered: {said}"
                " It bills: register it by hand (Instances → Register) or release it in the provider's console."
            )
            do_fail_rental(rental.pk, reason)
            return "failed"
        return "registered"
    if state in (None, GONE):
        return _boot_deadline(rental, f"{rental.provider} no longer lists {rental.provider_id}")
    return _boot_deadline(rental, f"{rental.provider} lists it {state} with no SSH endpoint yet")


def _boot_deadline(rental: Rental, said: str) -> str:
    waited = (timezone.now() - rental.changed_at).total_seconds()
    if waited < settings.RENT_BOOT_SECONDS:
        return "waiting"
    reason = (
        f"{rental.provider} created {rental.provider_id} but it did not run with an SSH endpoint within "
        f"{settings.RENT_BOOT_SECONDS} s ({said}). It may bill: it is listed as drift under the key; release it "
        "in the provider's console, or register it by hand once it runs."
    )
    do_fail_rental(rental.pk, reason)
    return "failed"
