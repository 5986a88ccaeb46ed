"""The page where a person makes or revokes their API tokens (a new token is shown once)."""

from django.contrib import messages
from django.shortcuts import redirect, render

from api.models import ApiToken
from wrapper.digits import ascii_int

# Redoc styles itself inline and searches in a blob: worker; scripts stay 'self' only, as on every page.
DOCS_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self' data:; worker-src blob:; connect-src 'self'; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'"
)


def docs(request):
    """The API reference, rendered in the browser by the vendored Redoc from the signed-in schema."""
    response = render(request, "api/docs.html")
    response.headers["Content-Security-Policy"] = DOCS_POLICY
    return response


def tokens(request):
    if request.method == "POST":
        if (revoke := ascii_int(request.POST.get("revoke", ""))) is not None:
            ApiToken.objects.filter(user=request.user, pk=revoke).update(revoked=True)
            messages.success(request, "Token revoked.")
            return redirect("api-tokens")
        name = request.POST.get("name", "").strip()[:80] or "token"
        _, token = ApiToken.objects.issue(request.user, name)
        return render(request, "api/tokens.html", {"tokens": request.user.api_tokens.all(), "new_token": token})
    return render(request, "api/tokens.html", {"tokens": request.user.api_tokens.all()})
