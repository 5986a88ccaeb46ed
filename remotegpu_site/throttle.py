"""Failed-login throttle: after N failures for one account (or 4N from one address), refuse for a window.

Counts live in the shared cache (Redis) so every web process sees them. If the cache is down
the throttle fails open and logs it: refusing every login during a Redis outage would lock the
team out of the page that tells them Redis is down.
"""

import hashlib
import logging

from django.conf import settings
from django.core.cache import cache

log = logging.getLogger(__name__)


def _keys(username: str, address: str) -> list[str]:
    user_digest = hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]
    return [f"login-fail:user:{user_digest}", f"login-fail:addr:{address}"]


def is_locked(username: str, address: str) -> bool:
    try:
        counts = cache.get_many(_keys(username, address))
    except Exception as exc:  # redis errors vary by client version
        log.warning("login throttle unavailable (%s); allowing the attempt", type(exc).__name__)
        return False
    user_key, address_key = _keys(username, address)
    # An address gets more tries than an account: a whole office may share one NAT address.
    return (
        int(counts.get(user_key, 0)) >= settings.LOGIN_FAILURE_LIMIT
        or int(counts.get(address_key, 0)) >= settings.LOGIN_ADDRESS_FAILURE_LIMIT
    )


def record_failure(username: str, address: str) -> None:
    try:
        for key in _keys(username, address):
            # add() starts the window only on the first failure; incr() keeps its expiry.
            if not cache.add(key, 1, timeout=settings.LOGIN_FAILURE_WINDOW):
                cache.incr(key)
    except Exception as exc:
        log.warning("login throttle could not record a failure (%s)", type(exc).__name__)


def clear(username: str, address: str) -> None:
    try:
        cache.delete(_keys(username, address)[0])
    except Exception as exc:
        log.warning("login throttle could not clear (%s)", type(exc).__name__)
