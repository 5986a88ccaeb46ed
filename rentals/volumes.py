"""A rent's durable volume, the worker's side: before any box is created, the volume it names is found
under the rent's key (by its id or name), or created in the rent's region when the rent asks for one of
a size and none of its name is listed. A volume create that may have landed is looked for by its name
before anything is sent again, as a box's is. Nothing is created for a box whose volume cannot be had.
"""

from django.db.models import Q

from fleet.models import Instance, InstanceState, Resource
from fleet.renting import create_volume, find_volume
from providers.http import ProviderError
from rentals.actions import do_record_volume
from rentals.models import Rental, RentalState


def ensure_volume(rental, credential) -> str | None:
    """Why the rent cannot have its volume (the rent fails with it), or None once it has its id."""
    provider = rental.candidates[0]  # a volume belongs to one provider (rentals/asking.read_volume)
    try:
        found = find_volume(provider, credential, rental.durable_volume)
        if found is not None:
            owner = other_owner(rental, provider, found)
            if owner:
                return (
                    f"{provider} volume {found['name']} ({found['id']}) is {owner}'s, not this project's: a team's key "
                    "lists every project's volumes, and one provider id has one owner. Nothing was created: name a "
                    "volume of this project's, or ask for one of a size to be created"
                )
            do_record_volume(rental.pk, provider, found, "found")
            return None
        if not rental.volume_gb:
            return (
                f"{provider} lists no volume {rental.durable_volume} under this key. Nothing was created: name one "
                "that exists, or ask for one of a size to be created"
            )
        ident = create_volume(
            provider, credential, rental.durable_volume, rental.volume_gb, rental.region, f"{rental.key}-volume"
        )
        # As the provider lists it now: its kind and what it bills (read, not assumed from the request).
        made = find_volume(provider, credential, ident) or {"id": ident, "name": rental.durable_volume}
    except ProviderError as exc:
        return f"the volume {rental.durable_volume} could not be had at {provider}: {exc}"
    do_record_volume(rental.pk, provider, made, "created")
    return None


def other_owner(rental, provider: str, volume: dict) -> str | None:
    """The project other than the rent's that owns this provider volume here, by name, or None."""
    return owner_here(rental.project_id, provider, str(volume.get("id") or ""), str(volume.get("name") or ""))


def owner_here(project_id, provider: str, ident: str, name: str = "") -> str | None:
    """The project other than project_id that owns a provider volume here, by name, or None: a resource
    registered beside one of its boxes, a box of it mounting it as its durable root, or its rent's volume
    (a rent form names one by its id or its name: both are looked for)."""
    keys = {ident, name} - {""}
    if not keys:
        return None
    resource = Resource.objects.filter(Q(provider_id__in=keys) | Q(name__in=keys, instance__profile_key=provider))
    resource = resource.filter(deleted_at__isnull=True).exclude(instance__project=project_id)
    owner = resource.values_list("instance__project__name", flat=True).first()
    ended = (RentalState.FAILED, RentalState.EXPIRED, RentalState.CANCELLED, RentalState.REJECTED)
    rents = Rental.objects.filter(volume__id__in=list(keys)).exclude(state__in=ended).exclude(project=project_id)
    owner = owner or rents.values_list("project__name", flat=True).first()
    if owner:
        return owner
    boxes = Instance.objects.filter(profile_key=provider, durable_volume__in=keys)
    boxes = boxes.exclude(state=InstanceState.RELEASED).exclude(project=project_id)
    return boxes.values_list("project__name", flat=True).first()


def volumes_of(project) -> list[str]:
    """This project's provider volumes RemoteGPU knows, in words, for the rent form: whose a volume is."""
    boxes = Instance.objects.filter(project=project).exclude(state=InstanceState.RELEASED).exclude(durable_volume="")
    said = [
        f"{volume} ({box}, {platform})"
        for volume, box, platform in boxes.values_list("durable_volume", "name", "profile_key")[:10]
    ]
    rents = project.rentals.exclude(volume={}).values_list("volume", "pk")[:10]
    said += [
        f"{volume.get('name') or volume.get('id')} (rent #{pk})" for volume, pk in rents if isinstance(volume, dict)
    ]
    return list(dict.fromkeys(said))
