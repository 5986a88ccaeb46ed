"""Thin Celery wrappers: the provider calls happen here, outside any transaction; results go through actions."""

from celery import shared_task
from django.conf import settings


@shared_task(acks_late=True, soft_time_limit=240, time_limit=270)
def create_rental(rental_pk: int) -> str:
    from rentals.creating import create

    return create(rental_pk)


@shared_task(acks_late=True, soft_time_limit=settings.RENT_PROVE_SECONDS, time_limit=settings.RENT_PROVE_SECONDS + 30)
def prove_rental(rental_pk: int) -> str:
    from rentals.proving import prove

    return prove(rental_pk)


@shared_task(acks_late=True, soft_time_limit=60, time_limit=90)
def poll_rental(rental_pk: int) -> str:
    from rentals.creating import poll

    said = poll(rental_pk)
    if said == "waiting":
        poll_rental.apply_async((rental_pk,), countdown=settings.RENT_POLL_SECONDS)
    return said


@shared_task(acks_late=True, soft_time_limit=60, time_limit=90)
def reconcile_rentals() -> dict:
    """Beat: expire, re-drive and poll what waits."""
    from rentals.reconcile import do_expire_rentals, do_redrive_stale

    expired = do_expire_rentals()
    found = do_redrive_stale()
    for pk in found["prove"]:
        prove_rental.delay(pk)
    for pk in found["redrive"]:
        create_rental.delay(pk)
    for pk in found["poll"]:
        poll_rental.delay(pk)
    return {"expired": expired, **found}
