"""The evidence check (`docs/product.md §4`): answer only when the knowledge base holds close
enough text.

This module holds the refusals, the admin's threshold and the comparison with it; the decision
itself (the threshold plus the further signals) is chat/answering/evidence_signals.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from chat.calibration import calibration_current
from chat.models import ChatSettings

EMPTY_KB_MESSAGE = "The knowledge base is empty. Please contact an admin."
NO_EVIDENCE_MESSAGE = (
    "I don't have enough information to answer that question. "
    "You might try contacting support or rephrasing your question."
)
NO_EVIDENCE_SUGGESTIONS = ["Contact support", "Rephrase your question"]
# Shown above an answer whose evidence cleared the check only narrowly (Message.Evidence.WEAK;
# the band: chat/answering/evidence_signals.py).
WEAK_EVIDENCE_NOTICE = (
    "The documents may not answer this directly; this is the closest they come. "
    "Check the sources below."
)
WEAK_EVIDENCE_CARD = "The documents may not answer this question directly."  # on each source card
# pgvector sums in float32: a cosine meant to be 0.35 comes back as 0.3499999. Compare at a
# resolution the model cannot tell apart anyway, so a threshold of 0.35 admits 0.35.
SIMILARITY_DECIMALS = 6


@dataclass(frozen=True)
class Refusal:
    reason: str  # "empty-knowledge-base" | "insufficient-evidence"
    message: str
    suggestions: list[str] = field(default_factory=list)


EMPTY_KB_REFUSAL = Refusal("empty-knowledge-base", EMPTY_KB_MESSAGE, [])
NO_EVIDENCE_REFUSAL = Refusal("insufficient-evidence", NO_EVIDENCE_MESSAGE, NO_EVIDENCE_SUGGESTIONS)


def chat_settings_get() -> ChatSettings:
    """The settings row (pk=1); its defaults when the row is missing. One statement written
    out: it runs for every question (docs/decisions/0152-statements-written-out.md)."""
    with connection.cursor() as cursor:
        cursor.execute(_SETTINGS_SQL)
        row = cursor.fetchone()
    if row is None:
        return ChatSettings(pk=1)
    return ChatSettings.from_db(connection.alias, _SETTINGS_FIELDS, row)


_SETTINGS_FIELDS = [field.attname for field in ChatSettings._meta.concrete_fields]
_SETTINGS_SQL = (
    f"SELECT {', '.join(f.column for f in ChatSettings._meta.concrete_fields)} "  # noqa: S608
    f"FROM {ChatSettings._meta.db_table} WHERE id = 1"
)


def evidence_threshold(chat_settings: ChatSettings | None = None) -> float:
    """settings.CHAT_EVIDENCE_THRESHOLD (environment) when set; else the knowledge base's
    automatic threshold (chat/calibration.py) when the admin chose it and it has been
    measured; else the admin's value."""
    configured = settings.CHAT_EVIDENCE_THRESHOLD
    if configured not in (None, ""):
        try:
            value = float(configured)
        except ValueError:
            value = -1.0
        if not 0.0 <= value <= 1.0:
            raise ImproperlyConfigured(
                f"CHAT_EVIDENCE_THRESHOLD must be a number from 0 to 1, not {configured!r}"
            )
        return value
    chat_settings = chat_settings or chat_settings_get()
    if chat_settings.evidence_threshold_automatic:
        calibration = calibration_current()
        if calibration is not None:
            return float(calibration.threshold)
    return float(chat_settings.evidence_threshold)


def meets_threshold(similarity: float | None, threshold: float) -> bool:
    if similarity is None:
        return False
    return round(similarity, SIMILARITY_DECIMALS) >= round(threshold, SIMILARITY_DECIMALS)
