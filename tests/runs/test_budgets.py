"""A project's cost envelope after creation: set and changed by its operators and approvers,
audited; a forecast above the budget warns on the dashboard card, on the project page and once per
period in a notification (a $50 budget once showed a $367.93 forecast with no warning)."""

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client
from django.utils import timezone

from core.models import AuditEntry
from fleet.models import Instance
from notifications.models import Event, Notification
from projects.models import Project
from runs.budgets import do_set_envelope, do_warn_forecasts
from runs.spend import envelope_of, period_bounds
from tests import factories
from tests.personas import join

pytestmark = pytest.mark.django_db


@pytest.fixture
def burning(alice, bob, carol):
    """A $50 envelope and a box billing $5/h since the start of the month: the forecast far exceeds it."""
    slug = f"bud{uuid.uuid4().hex[:8]}"
    project = factories.project(name=slug, slug=slug, budget=Decimal("50.00"))
    join(project, alice, bob, carol)
    box = factories.box(
        name=f"{slug}-box", project=project, profile_key="generic-ssh", state="running", rate_running=Decimal(5)
    )
    start = period_bounds("month", timezone.now())[0]
    Instance.objects.filter(pk=box.pk).update(created=max(timezone.now() - timedelta(hours=2), start))
    return project


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_forecast_above_the_budget_warns_on_the_card_and_the_project_page(burning, alice, bob):
    envelope = envelope_of(burning)
    assert envelope.forecast_now > Decimal(50) or timezone.now() > period_bounds("month", timezone.now())[
        1
    ] - timedelta(hours=8)  # at $5/h, above $50 unless fewer than ~8 h of the month are left
    if not envelope.forecast_over:
        pytest.skip("the month ends too soon for this box to overrun")
    client = client_of(bob)
    card = client.get("/").content.decode()
    assert 'class="warning forecast-over"' in card
    page = client.get(f"/projects/{burning.slug}/").content.decode()
    assert 'id="forecast-warning"' in page and f"${envelope.budget}" in page

    # Raised above the forecast (by an approver), the warning goes.
    do_set_envelope(
        burning.pk, {"budget": Decimal("100000"), "budget_period": "month", "run_cost_threshold": None}, actor=alice
    )
    assert 'id="forecast-warning"' not in client.get(f"/projects/{burning.slug}/").content.decode()


def test_operators_and_approvers_change_the_envelope_audited_and_nobody_else(burning, alice, bob, carol, dave):
    bob_page = client_of(bob)  # an operator: he may tighten the envelope
    response = bob_page.post(
        f"/projects/{burning.slug}/envelope/", {"budget": "40.00", "budget_period": "month", "run_cost_threshold": "5"}
    )
    assert response.status_code == 302
    burning.refresh_from_db()
    assert (burning.budget, burning.budget_period, burning.run_cost_threshold) == (
        Decimal("40.00"),
        "month",
        Decimal("5"),
    )
    page = bob_page.get(f"/projects/{burning.slug}/").content.decode()
    assert 'id="envelope-history"' in page and "changed budget: 50.00 → 40.00" in page
    assert 'id="envelope-tighten-only"' in page

    # Widening lets runs start without an approver: an operator is refused, the envelope unchanged.
    for wider in (
        {"budget": Decimal("75.50"), "budget_period": "month", "run_cost_threshold": Decimal("5")},
        {"budget": Decimal("40.00"), "budget_period": "week", "run_cost_threshold": Decimal("5")},
        {"budget": Decimal("40.00"), "budget_period": "month", "run_cost_threshold": None},
    ):
        with pytest.raises(PermissionDenied, match="approver of the project makes that change"):
            do_set_envelope(burning.pk, wider, actor=bob)
    refused = bob_page.post(f"/projects/{burning.slug}/envelope/", {"budget": "75.50", "budget_period": "month"})
    assert refused.status_code == 403 and Project.objects.get(pk=burning.pk).budget == Decimal("40")

    # An approver widens it.
    do_set_envelope(
        burning.pk,
        {"budget": Decimal("75.50"), "budget_period": "week", "run_cost_threshold": Decimal("5")},
        actor=alice,
    )
    changes = AuditEntry.objects.filter(project=burning, action="envelope.changed").order_by("id")
    history = [(e.data["field"], e.data["before"], e.data["after"]) for e in changes]
    assert history == [
        ("budget", "50.00", "40.00"),
        ("run_cost_threshold", "none", "5"),
        ("budget", "40.00", "75.50"),
        ("budget_period", "month", "week"),
    ]
    assert [e.actor for e in changes] == [bob, bob, alice, alice]
    assert 'id="envelope-tighten-only"' not in client_of(alice).get(f"/projects/{burning.slug}/").content.decode()

    # An approver too; a budget cleared is "no budget".
    assert do_set_envelope(
        burning.pk, {"budget": None, "budget_period": "week", "run_cost_threshold": None}, actor=alice
    )
    burning.refresh_from_db()
    assert burning.budget is None

    # Bad input is a form error that changes nothing, never a 500.
    bad = bob_page.post(f"/projects/{burning.slug}/envelope/", {"budget": "-3", "budget_period": "year"}, follow=True)
    assert bad.status_code == 200 and "The envelope is unchanged" in bad.content.decode()
    assert Project.objects.get(pk=burning.pk).budget_period == "week"

    # A member with no role: 403 (and no form); an outsider: 404.
    assert client_of(carol).post(f"/projects/{burning.slug}/envelope/", {"budget": "1"}).status_code == 403
    assert 'id="envelope-form"' not in client_of(carol).get(f"/projects/{burning.slug}/").content.decode()
    assert client_of(dave).post(f"/projects/{burning.slug}/envelope/", {"budget": "1"}).status_code == 404
    with pytest.raises(PermissionDenied):
        do_set_envelope(burning.pk, {"budget": None, "budget_period": "month", "run_cost_threshold": None}, actor=carol)


def test_an_overrun_forecast_is_notified_once_per_period(burning, bob):
    now = timezone.now()
    if not envelope_of(burning, now).forecast_over:
        pytest.skip("the month ends too soon for this box to overrun")
    assert do_warn_forecasts(now) == [burning.slug]
    assert do_warn_forecasts(now) == []  # once per period
    sent = Notification.objects.get(project=burning, event=Event.BUDGET)
    assert "above its $50.00 budget" in sent.text and "raise the budget" in sent.text
    # A changed envelope is warned about afresh when it is still overrun.
    do_set_envelope(
        burning.pk, {"budget": Decimal("45"), "budget_period": "month", "run_cost_threshold": None}, actor=bob
    )
    assert do_warn_forecasts(now) == [burning.slug]
    assert Notification.objects.filter(project=burning, event=Event.BUDGET).count() == 2
