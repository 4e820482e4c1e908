"""Content words of a text, as every word match of answering counts them.

`terms` lower-cases, drops `STOP_WORDS` and one-letter words (digits kept) and stems lightly
(plurals, -ing, -ed), so "policies" and "policy" match. The extractive answer's lexical score,
the evidence check's features and follow-up reading use it; follow-up reading and the
calibration's probes also leave out `STOP_WORDS`.
"""

from __future__ import annotations

from functools import lru_cache

from knowledge.sentences import WORD

# Distinct words whose term is remembered (`_term`): an organisation's vocabulary, about 7 MB at
# most; a word seen again costs a dictionary lookup instead of its stemming.
TERM_CACHE_WORDS = 1 << 15

STOP_WORDS = {
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
    "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but",
    "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for",
    "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself",
    "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself",
    "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on",
    "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same",
    "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them",
    "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too",
    "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which",
    "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours",
    "yourself", "yourselves", "many", "much", "may", "might", "must", "shall", "also", "get",
    "got", "one", "s", "t", "us", "tell", "please", "know", "want", "need",
}  # fmt: skip


def terms(text: str) -> list[str]:
    """Content words, lower-cased and lightly stemmed (plurals, -ing, -ed)."""
    return [term for term in map(_term, WORD.findall(text.lower())) if term is not None]


@lru_cache(maxsize=TERM_CACHE_WORDS)
def _term(word: str) -> str | None:
    """The term of one lower-cased word (its possessive 's dropped), None for a stop word or a
    one-letter word that is not a digit."""
    if word.endswith(("'s", "’s")):
        word = word[:-2]
    if word in STOP_WORDS or (len(word) < 2 and not word.isdigit()):
        return None
    return _stem(word)


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word
