"""The API's permission: active staff only (`knowledge.access.user_is_staff`)."""

from __future__ import annotations

from rest_framework.permissions import BasePermission

from knowledge.access import user_is_staff


class IsStaff(BasePermission):
    """Active staff (DRF's own admin-user permission looks at `is_staff` alone)."""

    def has_permission(self, request, view) -> bool:
        return user_is_staff(getattr(request, "user", None))
