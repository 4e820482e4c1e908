"""Provider groups joined by bare name move under OIDC_GROUP_PREFIX
(docs/decisions/0141-side-doors-closed.md).

For each group name an identity holds from the provider (`OidcIdentity.provider_groups`):

- a group whose members all hold it from the provider was made by sign-in: it is renamed
  ("HR" → "idp:HR") and keeps whatever collections it reads;
- a group that also has members the provider did not put there is a group made in Sourced
  that sign-in joined by its name: the provider's members leave it for the prefixed group
  (created, reading nothing until an administrator says so).

Each identity's `provider_groups` then names the prefixed groups. Nothing happens with an
empty prefix. Not reversed: the old names are not needed again.
"""

from django.conf import settings
from django.db import migrations


def provider_groups_prefix(apps, schema_editor) -> None:
    prefix = getattr(settings, "OIDC_GROUP_PREFIX", "")
    if not prefix:
        return
    identity_model = apps.get_model("accounts", "OidcIdentity")
    group_model = apps.get_model("auth", "Group")
    identities = list(identity_model.objects.all())
    holders: dict[str, set[int]] = {}
    for identity in identities:
        for name in identity.provider_groups:
            if not name.startswith(prefix):
                holders.setdefault(name, set()).add(identity.user_id)
    for name, user_ids in sorted(holders.items()):
        target_name = (prefix + name)[:150]
        group = group_model.objects.filter(name=name).first()
        if group is None:
            continue  # deleted since: the next sign-in makes the prefixed one
        members = set(group.user_set.values_list("pk", flat=True))
        if members <= user_ids and not group_model.objects.filter(name=target_name).exists():
            group.name = target_name
            group.save(update_fields=["name"])
            continue
        target, _ = group_model.objects.get_or_create(name=target_name)
        given = members & user_ids
        target.user_set.add(*given)
        group.user_set.remove(*given)
    for identity in identities:
        identity.provider_groups = [
            name if name.startswith(prefix) else (prefix + name)[:150]
            for name in identity.provider_groups
        ]
        identity.save(update_fields=["provider_groups"])


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_preferences"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(provider_groups_prefix, migrations.RunPython.noop)]
