"""The page where a person makes or revokes their API tokens (a new token is shown once)."""

from django.contrib import messages
from django.shortcuts import redirect, render

from api.models import ApiToken


def tokens(request):
    if request.method == "POST":
        if request.POST.get("revoke", "").isdigit():
            ApiToken.objects.filter(user=request.user, pk=int(request.POST["revoke"])).update(revoked=True)
            messages.success(request, "Token revoked.")
            return redirect("api-tokens")
        name = request.POST.get("name", "").strip()[:80] or "token"
        _, token = ApiToken.objects.issue(request.user, name)
        return render(request, "api/tokens.html", {"tokens": request.user.api_tokens.all(), "new_token": token})
    return render(request, "api/tokens.html", {"tokens": request.user.api_tokens.all()})
