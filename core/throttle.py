"""Failed-login throttle: after N failures for one account (or 4N from one address), refuse for a window.

Counts live in the shared cache (Redis) so every web process sees them. If the cache is down
the throttle fails open and logs it: refusing every login during a Redis outage would lock the
team out of the page that tells them Redis is down.
"""

import hashlib
import logging
import unicodedata

from django.conf import settings
from django.core.cache import cache

log = logging.getLogger(__name__)


def account_key(username: str) -> str:
    """The name as the sign-in form authenticates it (NFKC, as Django's UsernameField), case-folded:
    ｃｈａｒｌｉｅ, ⅽharlie and CHARLIE are one account's attempts, not three accounts' five each."""
    return unicodedata.normalize("NFKC", username).strip().casefold()


def _keys(username: str, address: str) -> list[str]:
    user_digest = hashlib.sha256(account_key(username).encode()).hexdigest()[:32]
    return [f"login-fail:user:{user_digest}", f"login-fail:addr:{address}"]


def admit(username: str, address: str) -> bool:
    """Count this attempt and say whether it may be checked, in one atomic step per counter.

    Checking first and recording after let 30 parallel wrong passwords all be checked (limit 5):
    each INCR now reserves its attempt, so at most the limit are ever checked per window; a
    successful sign-in clears the account's counter.
    """
    user_key, address_key = _keys(username, address)
    try:
        counts = {key: _incr(key) for key in (user_key, address_key)}
    except Exception as exc:  # redis errors vary by client version
        log.warning("login throttle unavailable (%s); allowing the attempt", type(exc).__name__)
        return True
    # An address gets more tries than an account: a whole office may share one NAT address.
    return counts[user_key] <= settings.LOGIN_FAILURE_LIMIT and counts[address_key] <= (
        settings.LOGIN_ADDRESS_FAILURE_LIMIT
    )


def _incr(key: str) -> int:
    # add() starts the window on the first attempt; incr() is atomic in Redis and keeps the expiry.
    if cache.add(key, 1, timeout=settings.LOGIN_FAILURE_WINDOW):
        return 1
    return cache.incr(key)


def clear(username: str, address: str) -> None:
    """A successful sign-in: the account starts afresh, and its attempt no longer counts for the address."""
    user_key, address_key = _keys(username, address)
    try:
        cache.delete(user_key)
        cache.decr(address_key)
    except ValueError:
        pass  # the address window expired meanwhile: nothing to give back
    except Exception as exc:
        log.warning("login throttle could not clear (%s)", type(exc).__name__)
