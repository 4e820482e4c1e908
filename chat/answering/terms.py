"""Content words of a text, as every word match of answering counts them.

`terms` lower-cases, drops `STOP_WORDS` and one-letter words (digits kept) and stems lightly
(plurals, -ing, -ed), so "policies" and "policy" match. The extractive answer's lexical score,
the evidence check's features and follow-up reading use it; follow-up reading and the
calibration's probes also leave out `STOP_WORDS`.
"""

from __future__ import annotations

import re

from knowledge.sentences import WORD

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
    found = []
    for word in WORD.findall(text.lower()):
        word = re.sub(r"['’]s$", "", word)
        if word in STOP_WORDS or (len(word) < 2 and not word.isdigit()):
            continue
        found.append(_stem(word))
    return found


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
