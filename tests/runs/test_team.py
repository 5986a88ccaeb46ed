"""Team administration in the app: users with e-mail, roles and projects in one place,
for admins only, audited; a one-time password shown once and stored nowhere in clear."""

import re

import pytest
from django.contrib.auth import get_user_model

from core.models import AuditEntry
from projects.team import do_set_roles
from tests import factories
from tests.personas import join

pytestmark = pytest.mark.django_db


def test_an_admin_creates_an_operator_and_an_approver_who_can_sign_in(client, admin_user):
    vision = factories.project(name="Vision", slug="vision")
    client.force_login(admin_user)
    assert 'href="/team/"' in client.get("/").content.decode()
    response = client.post(
        "/team/users/", {"username": "olga", "email": "olga@example.org", "roles": ["operator"], "projects": ["vision"]}
    )
    page = response.content.decode()
    password = re.search(r'id="one-time-password">([^<]+)<', page).group(1)
    assert response["Cache-Control"] == "no-store" and len(password) == 20
    olga = get_user_model().objects.get(username="olga")
    assert olga.email == "olga@example.org" and olga.has_perm("projects.operate", vision)
    assert not olga.has_perm("projects.approve_cost", vision) and vision.members.filter(pk=olga.pk).exists()
    assert password not in olga.password  # only its hash is stored
    refused = client.post("/team/users/", {"username": "paul", "email": "paul@example.org", "roles": ["approver"]})
    assert "choose the projects" in refused.content.decode() if refused.status_code == 200 else True
    assert not get_user_model().objects.filter(username="paul").exists()  # a role needs its project
    client.post(
        "/team/users/", {"username": "paul", "email": "paul@example.org", "roles": ["approver"], "projects": ["vision"]}
    )
    paul = get_user_model().objects.get(username="paul")
    assert paul.has_perm("projects.approve_cost", vision) and not paul.has_perm("projects.operate", vision)
    assert password not in client.get("/team/").content.decode()  # shown once

    client.logout()
    assert client.login(username="olga", password=password)


def test_roles_change_per_project_in_one_place_and_each_change_is_audited(client, admin_user, bob):
    vision = factories.project(name="Vision", slug="vision")
    audio = factories.project(name="Audio", slug="audio")
    join(vision, bob)
    join(audio, bob)  # operator of both
    client.force_login(admin_user)
    page = client.get("/team/").content.decode()
    assert f'name="roles-{vision.pk}" value="operator" checked' in page
    post = {
        "email": "bob@new.example.org",
        "projects": [vision.pk, audio.pk],
        f"roles-{vision.pk}": ["operator", "approver"],
    }
    client.post(f"/team/users/{bob.pk}/", post)
    bob = get_user_model().objects.get(pk=bob.pk)  # permissions are cached per instance
    assert bob.email == "bob@new.example.org" and bob.has_perm("projects.approve_cost", vision)
    assert not bob.has_perm("projects.operate", audio) and not bob.has_perm("projects.approve_cost", audio)
    entries = AuditEntry.objects.filter(subject=bob, action__startswith="role.")
    events = {(e.data["role"], e.action, e.project.slug, e.actor) for e in entries}
    assert events == {
        ("approver", "role.granted", "vision", admin_user),
        ("operator", "role.revoked", "audio", admin_user),
    }
    assert "approver granted to bob on Vision" in " ".join(client.get("/team/").content.decode().split()).replace(
        '<a href="/projects/vision/">Vision</a>', "Vision"
    )
    with pytest.raises(Exception, match="own admin role"):
        do_set_roles(admin_user.pk, False, {}, actor=admin_user)
    with pytest.raises(Exception, match="not a member"):
        do_set_roles(bob.pk, False, {factories.project(name="X", slug="x").pk: {"operator"}}, actor=admin_user)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"username": "x", "email": "not-an-address"}, "An e-mail address"),
        ({"username": "", "email": "a@example.org"}, "A user name"),
        ({"username": "y", "email": "y@example.org", "roles": ["root"]}, "Unknown role(s): root"),
    ],
)
def test_bad_input_gets_a_clear_error_and_creates_nobody(client, admin_user, data, error):
    client.force_login(admin_user)
    before = get_user_model().objects.count()
    page = client.post("/team/users/", data, follow=True).content.decode()
    assert error in page and get_user_model().objects.count() == before


def test_only_an_admin_reaches_the_team(client, bob):
    client.force_login(bob)
    assert client.get("/team/").status_code == 403
    assert client.post("/team/users/", {"username": "z", "email": "z@example.org"}).status_code == 403
    assert not get_user_model().objects.filter(username="z").exists()


def test_an_admin_is_shown_holding_every_role_and_saving_keeps_its_memberships(client, admin_user):
    """An admin holds both roles everywhere: its row said "operator ✓ approver ☐" per project, which reads
    as a missing role. It says so in one line now, and a save keeps the memberships it had."""
    vision = factories.project(name="Vision", slug="vision")
    other = get_user_model().objects.create_superuser("root2", "root2@example.org", "x")
    join(vision, other)  # an operator membership from before it was made an admin
    client.force_login(admin_user)
    page = client.get("/team/").content.decode()
    row = page[page.index('id="user-root2"') :]
    row = row[: row.index("</tr>")]
    assert "holds every role in every project as an admin" in row
    assert 'type="checkbox" name="roles-' not in row  # no per-project boxes to misread
    fields = dict(re.findall(r'<input\s+type="hidden"\s+name="(roles-\d+|projects)" value="([^"]+)"', row))
    client.post(f"/team/users/{other.pk}/", {"email": other.email, "admin": "on", **fields})
    assert vision.members.filter(pk=other.pk).exists()
    assert get_user_model().objects.get(pk=other.pk).has_perm("projects.operate", vision)
