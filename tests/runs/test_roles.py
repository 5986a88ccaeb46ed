"""Roles per project: operator and approver are held in a project, admins hold every
role everywhere; the first admin gets a generated password, printed once."""

import io

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command

from projects.models import Membership, Project, Role
from tests import factories
from tests.personas import grant, join

pytestmark = pytest.mark.django_db


@pytest.fixture
def vision():
    return factories.project(name="Vision", slug="vision")


@pytest.fixture
def audio():
    return factories.project(name="Audio", slug="audio")


def test_a_role_holds_in_its_project_only(bob, vision, audio):
    join(vision, bob)  # operator of vision
    join(audio, bob)
    Membership.objects.filter(project=audio, user=bob).update(operator=False)
    bob = get_user_model().objects.get(pk=bob.pk)
    assert bob.has_perm("projects.operate", vision) and not bob.has_perm("projects.operate", audio)
    assert not bob.has_perm("projects.approve_cost", vision)
    # Asked without a project: "in some project" (a page offers New run; the action decides).
    assert bob.has_perm("projects.operate") and bob.has_perm("projects.add_project")
    assert list(Project.objects.where_role(bob, Role.OPERATOR)) == [vision]


def test_an_approver_of_one_project_approves_nothing_elsewhere(alice, vision, audio):
    join(vision, alice)
    grant(alice, audio)  # a member of audio with no role in it
    assert alice.has_perm("projects.approve_cost", vision)
    assert not alice.has_perm("projects.approve_cost", audio)
    assert list(Project.objects.where_role(alice, Role.APPROVER)) == [vision]


def test_a_member_without_a_role_and_an_inactive_person_hold_nothing(charlie, bob, vision):
    join(vision, charlie, bob)
    assert not charlie.has_perm("projects.operate") and not charlie.has_perm("projects.operate", vision)
    bob.is_active = False
    bob.save()
    bob = get_user_model().objects.get(pk=bob.pk)
    assert not bob.has_perm("projects.operate", vision) and not Project.objects.where_role(bob, Role.OPERATOR)


def test_an_admin_holds_every_role_in_every_project(admin_user, vision):
    assert admin_user.has_perm("projects.approve_cost", vision) and admin_user.has_perm("projects.operate", vision)
    assert list(Project.objects.where_role(admin_user, Role.APPROVER)) == [vision]


def test_roles_are_read_once_per_request(bob, vision, audio, django_assert_num_queries):
    join(vision, bob)
    bob = get_user_model().objects.get(pk=bob.pk)
    with django_assert_num_queries(1) as first:  # the memberships, once (no global grants are read)
        for project in (vision, audio, vision, None):
            bob.has_perm("projects.operate", project)
    assert "runs_project_members" in first.captured_queries[0]["sql"]
    with django_assert_num_queries(0):
        for project in (audio, vision, None):
            bob.has_perm("projects.approve_cost", project)


def test_no_global_role_groups_remain():
    assert not Group.objects.filter(name__in=["operators", "approvers"]).exists()


def test_ensure_admin_prints_a_working_password_once():
    first, second = io.StringIO(), io.StringIO()
    call_command("ensure_admin", stdout=first)
    call_command("ensure_admin", stdout=second)
    password = first.getvalue().split("password: ", 1)[1].split()[0]
    admin = get_user_model().objects.get(username="admin")
    assert admin.check_password(password)
    assert admin.is_superuser
    assert "password" in second.getvalue() and password not in second.getvalue()
