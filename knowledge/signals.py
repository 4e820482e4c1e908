"""Signals of the knowledge app: other apps learn that the searchable knowledge base changed
without the knowledge app knowing who listens (the chat recalibrates its evidence check)."""

from __future__ import annotations

from typing import Any

from django.dispatch import Signal

# Sent (no arguments beyond `sender`) after documents were written, re-processed, enabled,
# disabled or deleted: whatever is searchable may differ.
knowledge_changed = Signal()


def knowledge_changed_send() -> None:
    knowledge_changed.send(sender=knowledge_changed_send)


def document_deleting(sender: type, instance: Any, **kwargs: Any) -> None:
    """pre_delete of a Document: its sentences' vectors are pruned after the commit
    (knowledge/services/vectors.py, `document_sentences_prune_on_commit`)."""
    # Imported here: importing knowledge.services runs the package, whose modules import this
    # one (they send `knowledge_changed`).
    from knowledge.services.vectors import document_sentences_prune_on_commit

    document_sentences_prune_on_commit([instance.pk])
