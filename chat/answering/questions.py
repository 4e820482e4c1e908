"""Questions as the pipeline accepts them, and conversation titles made from them."""

from __future__ import annotations

import re
import unicodedata

from django.conf import settings

from chat.errors import AnswerError

TITLE_MAX_CHARS = 80
TITLE_FALLBACK = "New conversation"
ELLIPSIS = "…"
# Words a cut title must not end on ("…policy on…", "…integrity and…").
_DANGLING = {
    "a", "an", "the", "and", "or", "but", "nor", "of", "to", "in", "on", "at", "by", "for",
    "with", "from", "into", "onto", "about", "as", "is", "are", "was", "were", "be", "if",
    "so", "than", "that", "this", "these", "those", "my", "our", "your", "its", "their",
    "his", "her", "via", "per", "not", "no", "do", "does", "did", "can", "will", "what",
    "which", "who", "when", "where", "why", "how",
}  # fmt: skip
_KEEP_CONTROLS = {"\n", "\t"}


def text_clean(text: str) -> str:
    """NFC text without control or surrogate characters; newlines and tabs kept.

    Private-use characters stay: they are a person's text (a company font's glyphs, the logo a
    keyboard types), stored and shown like any other character."""
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    return "".join(
        char
        for char in text
        if char in _KEEP_CONTROLS or unicodedata.category(char) not in {"Cc", "Cs"}
    )


def question_normalize(text: object, *, field: str = "message") -> str:
    """The question as answered and stored: cleaned, trimmed and within the length bound.

    Raises AnswerError (validation-failed, 422) when it is not text, is empty once cleaned, or
    is longer than settings.CHAT_MAX_MESSAGE_CHARS. A question longer than the embedding
    model's window is accepted: the pipeline embeds its beginning and warns.
    """
    if not isinstance(text, str):
        raise AnswerError.validation(field, "The message must be text.")
    cleaned = text_clean(text).strip()
    if not cleaned:
        raise AnswerError.validation(field, "The message is empty.")
    limit = settings.CHAT_MAX_MESSAGE_CHARS
    if len(cleaned) > limit:
        raise AnswerError.validation(
            field,
            f"The message is too long: {len(cleaned)} characters, the limit is {limit}.",
        )
    return cleaned


def conversation_title_from(message: str) -> str:
    """The first 80 characters of the first message, cut at a word boundary, never ending on a
    dangling short word, "…" appended when cut (docs/product.md §7).

    >>> conversation_title_from("Refund?")
    'Refund?'
    """
    text = " ".join(text_clean(message).split())
    if not text:
        return TITLE_FALLBACK
    if len(text) <= TITLE_MAX_CHARS:
        return text
    head = text[:TITLE_MAX_CHARS]
    words = head.split(" ")
    if not text[TITLE_MAX_CHARS].isspace() and len(words) > 1:
        words = words[:-1]  # the last word was cut in the middle
    while len(words) > 1 and _is_dangling(words[-1]):
        words = words[:-1]
    title = " ".join(words).rstrip(" ,;:.-–—(/&")
    if not title:  # one enormous word: a hard cut is all that is left
        title = text[: TITLE_MAX_CHARS - 1]
    return title + ELLIPSIS


def _is_dangling(word: str) -> bool:
    bare = re.sub(r"^\W+|\W+$", "", word).lower()
    return len(bare) <= 2 or bare in _DANGLING
