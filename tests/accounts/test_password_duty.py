"""A one-time password is replaced before anything else, without a query per page."""

import pytest
from django.core import mail
from django.test import Client

from accounts.models import PasswordDuty
from core.models import AuditEntry
from projects.team import do_create_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def newcomer(admin_user):
    user, password = do_create_user("nina", "nina@example.com", set(), [], actor=admin_user)
    return user, password


def test_a_new_person_must_replace_the_one_time_password(newcomer, admin_user):
    user, password = newcomer
    assert PasswordDuty.objects.filter(user=user).exists()
    assert AuditEntry.objects.get(subject=user, action__startswith="password.").action == "password.issued"
    client = Client()
    assert client.post("/login/", {"username": "nina", "password": password}).status_code == 302
    for url in ["/", "/runs/", "/instances/", "/account/tokens/"]:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"] == "/account/password/", url
    api = client.get("/api/runs/")
    assert api.status_code == 403 and api.json()["error"] == "password_change_required"
    assert client.get("/account/password/").status_code == 200

    response = client.post(
        "/account/password/",
        {"old_password": password, "new_password1": "a-Long-own-pass-42", "new_password2": "a-Long-own-pass-42"},
    )
    assert response.status_code == 302 and response["Location"] == "/"
    assert not PasswordDuty.objects.filter(user=user).exists()
    passwords = AuditEntry.objects.filter(subject=user, action__startswith="password.")
    assert [e.action for e in passwords] == ["password.changed", "password.issued"]
    assert client.get("/runs/").status_code == 200  # the same session goes on, free


def test_a_wrong_old_password_keeps_the_duty_and_the_password(newcomer):
    user, password = newcomer
    client = Client()
    client.post("/login/", {"username": "nina", "password": password})
    response = client.post(
        "/account/password/",
        {"old_password": "wrong", "new_password1": "a-Long-own-pass-42", "new_password2": "a-Long-own-pass-42"},
    )
    assert response.status_code == 200 and b"invalid" in response.content
    user.refresh_from_db()
    assert user.check_password(password) and PasswordDuty.objects.filter(user=user).exists()


def test_the_duty_costs_no_query_on_a_page(newcomer, django_assert_num_queries):
    """The duty is read once at sign-in into the session: a free person's page does not ask again."""
    user, password = newcomer
    PasswordDuty.objects.filter(user=user).delete()
    client = Client()
    client.post("/login/", {"username": "nina", "password": password})
    client.get("/account/password/")  # warm
    with django_assert_num_queries(2):  # the session and the user, as before the duty existed
        assert client.get("/account/password/").status_code == 200


def test_reset_mails_a_link_that_sets_the_password_once(newcomer, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    user, _ = newcomer
    client = Client()
    page = client.post("/account/password/reset/", {"email": "nina@example.com"})
    assert page.status_code == 302 and page["Location"] == "/account/password/reset/sent/"
    unknown = client.post("/account/password/reset/", {"email": "nobody@example.com"})
    assert unknown.status_code == 302 and unknown["Location"] == page["Location"]  # never says who exists
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["nina@example.com"]
    link = next(line for line in mail.outbox[0].body.splitlines() if "/account/password/reset/" in line)
    path = link.split("testserver", 1)[1]
    form = client.get(path, follow=True)
    assert form.status_code == 200 and b"new_password1" in form.content
    done = client.post(
        form.redirect_chain[-1][0], {"new_password1": "Reset-by-mail-77", "new_password2": "Reset-by-mail-77"}
    )
    assert done.status_code == 302 and done["Location"] == "/login/"
    user.refresh_from_db()
    assert user.check_password("Reset-by-mail-77") and not PasswordDuty.objects.filter(user=user).exists()
    assert b"reset-link-invalid" in client.get(path, follow=True).content
