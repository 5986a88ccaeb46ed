"""The role groups map to permissions; the first admin gets a generated password, printed once."""

import io

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command

from runs.roles import APPROVERS, OPERATORS

pytestmark = pytest.mark.django_db


def test_operators_may_operate_but_not_approve(bob):
    assert bob.has_perm("projects.operate")
    assert bob.has_perm("projects.add_project")
    assert not bob.has_perm("projects.approve_cost")


def test_approvers_may_approve(alice):
    assert alice.has_perm("projects.approve_cost")


def test_user_without_group_has_no_role(charlie):
    assert not charlie.has_perm("projects.operate")
    assert not charlie.has_perm("projects.approve_cost")


def test_groups_exist_after_migrate():
    assert set(Group.objects.values_list("name", flat=True)) >= {OPERATORS, APPROVERS}


def test_ensure_admin_prints_a_working_password_once():
    first, second = io.StringIO(), io.StringIO()
    call_command("ensure_admin", stdout=first)
    call_command("ensure_admin", stdout=second)
    password = first.getvalue().split("password: ", 1)[1].split()[0]
    admin = get_user_model().objects.get(username="admin")
    assert admin.check_password(password)
    assert admin.is_superuser
    assert set(admin.groups.values_list("name", flat=True)) == {OPERATORS, APPROVERS}
    assert "password" in second.getvalue() and password not in second.getvalue()
