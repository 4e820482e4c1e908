"""Shared fixtures: real PostgreSQL (the embedded server's test database), the real model."""

from __future__ import annotations

import pytest


@pytest.fixture
def staff_user(django_user_model):
    return django_user_model.objects.create_user(
        username="staff", password="staff-pass-123", is_staff=True
    )


@pytest.fixture
def other_staff_user(django_user_model):
    return django_user_model.objects.create_user(
        username="other", password="other-pass-123", is_staff=True
    )
