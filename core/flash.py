"""Run an action for a view and tell the person how it went (one place for the pattern)."""

from django.contrib import messages
from django.core.exceptions import ValidationError


def perform(request, action, success: str) -> bool:
    """Call action(); a ValidationError becomes an error message, anything else propagates."""
    try:
        action()
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return False
    messages.success(request, success)
    return True
