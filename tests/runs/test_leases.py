"""Watch leases: exactly one holder, even when many workers claim at once."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from runs.models import WatchLease
from tests import factories
from watching import leases

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def instance():
    project = factories.project(name="Lease", slug="lease")
    return factories.box(name="lease-box-20261129", project=project, profile_key="local")


def test_concurrent_claims_yield_exactly_one_holder(instance):
    for round_number in range(5):
        WatchLease.objects.all().delete()
        barrier = threading.Barrier(8)
        results = []

        def contender(name, barrier=barrier, results=results):
            barrier.wait()
            try:
                results.append((name, leases.claim(instance.pk, name, 30)))
            finally:
                connection.close()

        threads = [threading.Thread(target=contender, args=(f"worker-{round_number}-{i}",)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(name for name, _ in results) == sorted(f"worker-{round_number}-{i}" for i in range(8))
        assert all(isinstance(won, bool) for _, won in results), results  # every contender answered
        winners = [name for name, won in results if won]
        assert len(winners) == 1, results
        assert WatchLease.objects.get().owner == winners[0]


def test_live_lease_refuses_a_second_watcher_and_only_the_owner_renews(instance):
    assert leases.claim(instance.pk, "a", 30)
    assert not leases.claim(instance.pk, "b", 30)
    assert not leases.renew(instance.pk, "b", 30)
    assert leases.renew(instance.pk, "a", 30)


def test_expired_lease_is_taken_over_and_the_old_owner_loses_it(instance):
    assert leases.claim(instance.pk, "dead-worker", 30)
    WatchLease.objects.filter(instance=instance).update(expires_at=timezone.now() - timedelta(seconds=1))  # it died
    assert leases.claim(instance.pk, "new-worker", 30)
    assert not leases.renew(instance.pk, "dead-worker", 30)
    assert WatchLease.objects.get().owner == "new-worker"
