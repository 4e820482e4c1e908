"""Follow-up questions (`docs/product.md §5`): a question that leans on the conversation is
searched with the context of the previous questions, without a language model.

"What is the nightly hotel cap in Lisbon?" → "And in London?" is searched as "What is the
nightly hotel cap in? And in London?" (`contextual_query`): the question that opened the topic
(the latest one searched as written) and the previous question, as written, less the words the
follow-up replaces (a name the follow-up brings replaces the previous names, a number the
previous numbers, unless it refers back: "What did she do at Stanford?" keeps "Ride"), then the
follow-up as written. Read so, the embedding model sees two questions rather than a list of
keywords (`CONTEXT_AS_WRITTEN`; the content-word reading, "nightly hotel cap London", is kept
for `manage.py evaluate_followups --try`). A follow-up is read in context only when the context
holds a content word the follow-up does not; words that only ask for more ("anything else
interesting about this article?") are no such word.

A question *leans on the conversation* (`leans_on_conversation`) when it starts like a
continuation ("And …", "What about …", "How about …"), refers back ("it", "she", "this album",
"those", "the same"), asks for more ("anything else?", "who else …", "… too?") or has no
content word of its own. `search_plan` returns how to search for a question:

- a question that only asks for more (`asks_for_more`: "anything else?", "tell me more"), after
  an answered one: what that one was searched as, preferring its cited documents, then as
  written within them;
- a reply to the assistant (`answers_the_assistant`: "yes, I am a veteran", "I'm 70"): in
  context (its "yes"/"I'm" left out), then as written;
- a question that leans on the conversation: in context, then (`SearchPlan.fallback`) as
  written within the documents the conversation is about (anywhere when the previous question
  found nothing);
- a question that picks up a word of the previous question or of its answer ("Were there any
  hit songs from the album?"): in context, then as written;
- any other question: as written, then in context.

A question searched in context may hold a word of its own that the knowledge base has never
held (`unknown_own_terms`; typos of known words, numbers and words that ask or converse rather
than name anything excused): what was found then answers the conversation, perhaps not the
follow-up. The search step (chat/answering/search.py) answers it with the weak-evidence notice
when it was read in context first after an answered question ("I have diabetes" after "Am I
covered if I get sick abroad?"), and refuses it otherwise (after a refusal, or a question that
stands on its own and found nothing as written). A search in context prefers the chunks of the
documents the previous answer cited (`SearchPlan.prefer_documents`: knowledge/retrieval.py
`chunks_search(prefer_document_ids=...)`, a third ranking in the fusion), and its extractive
answer prefers the sentences that come right after what the previous answer gave
(`said_before`, `FOLLOWS_SAID_BONUS`): a conversation goes on through its document.

Why this reading, the fallbacks and the unknown-word guard:
`docs/decisions/0025-follow-up-search-planning.md`; the kinds of follow-up real dialogues hold
(aspect changes, "anything else?", replies) and their measurements:
`docs/decisions/0031-follow-ups-by-kind.md`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from chat.answering.stage_cpu import cpu_stage
from chat.answering.terms import STOP_WORDS, terms
from knowledge.access import Reader
from knowledge.sentences import WORD
from knowledge.vocabulary import question_terms, vocabulary_get

# 1: a follow-up read in context is the context's questions as written (less the names or
# numbers it replaces) followed by the follow-up as written; 0: their content words, at most
# MAX_CARRIED_TERMS of the context's (the rarest in the knowledge base, in their order), then
# the follow-up's. Chosen on folds: docs/decisions/0031-follow-ups-by-kind.md.
CONTEXT_AS_WRITTEN = 1
MAX_CARRIED_TERMS = 5
# What the extractive answer of a follow-up read in context adds to the score of a sentence that
# comes right after one the previous answer gave (chat/answering/extractive.py `follows_said`):
# a conversation goes on through its document. 0: nothing. Chosen on folds:
# docs/decisions/0031-follow-ups-by-kind.md.
FOLLOWS_SAID_BONUS = 0.1

_CONTINUATION_START = re.compile(
    r"^\s*(?:and|also|but|so|then|plus|or|what about|how about|what of|and what about|"
    r"same for|what if|is that|are those|does that|do they|did they|was that)\b",
    re.IGNORECASE,
)
# A reply to the assistant rather than a question: it starts like one ("yes, …", "no, …",
# "I'm …", "we …", "my …") and does not end with a question mark.
_REPLY_START = re.compile(
    r"^\s*(?:yes|yeah|yep|no|nope|i|i['’]m|im|i['’]ve|i['’]d|we|we['’]re|we['’]ve|my|our|"
    r"it['’]s|she['’]s|he['’]s|they['’]re)\b",
    re.IGNORECASE,
)
# Words of a reply that say nothing to search for: "yes", "I'm", "we're".
_REPLY_WORDS = {
    "yes", "yeah", "yep", "no", "nope", "ok", "okay", "sure", "please", "thanks", "thank",
    "i'm", "i’m", "im", "i've", "i’ve", "i'd", "i’d", "we're", "we’re", "we've", "we’ve",
    "it's", "it’s", "she's", "she’s", "he's", "he’s", "they're", "they’re",
}  # fmt: skip
# Words that point back into the conversation.
_ANAPHORS = {
    "it", "its", "itself", "they", "them", "their", "theirs", "themselves", "he", "him", "his",
    "himself", "she", "her", "hers", "herself", "this", "that", "these", "those", "there",
    "such", "same", "else", "former", "latter", "too", "either",
}  # fmt: skip
# "that"/"there" in these uses point nowhere: "Is there a dress code?", "Did you know that …".
_NON_ANAPHORIC = re.compile(
    r"\b(?:is|are|was|were|will|would|be|been)\s+there\b|\bthere\s+(?:is|are|was|were)\b|"
    r"\b(?:so|such|now|given|provided|except|know|say|says|said|mean|means|ensure|check)\s+"
    r"that\b|\bthat\s+(?:is|are|was|were|has|have|had|can|will)\b(?!\s*\?)",
    re.IGNORECASE,
)
# Words that ask for more of the same ("anything else?", "tell me more").
_MORE = {"else", "more", "other", "others", "further", "additional", "anything", "tell"}
# Words that ask for more rather than name anything ("Anything else interesting about this
# article?"): left out of a search query, like stop words and anaphors ("else", "more", "other").
_ABOUT_THE_CONVERSATION = {
    "anything", "anyone", "anybody", "something", "interesting", "aspect", "aspects",
    "article", "text", "document", "section", "tell", "fact", "facts", "information", "info",
    "detail", "details", "others", "notable", "mention", "mentioned",
}  # fmt: skip
# Words that ask, agree or converse rather than name anything ("how long …?", "yes, I'm 70",
# "what else should I know?"; "m" of "I'm"): never counted as words the knowledge base lacks
# (`unknown_own_terms`).
_CONVERSATIONAL = {
    "yes", "yeah", "yep", "no", "nope", "ok", "okay", "please", "thanks", "thank", "sure",
    "know", "want", "wondering", "wonder", "long", "much", "many", "often", "soon", "far",
    "m", "s", "re", "ve", "ll", "d", "t", *_REPLY_WORDS,
}  # fmt: skip
_NUMBER = re.compile(r"^\d+(?:[.,]\d+)?$")
_WORD_EDGE = re.compile(r"^\W+|\W+$")  # the punctuation around a word of running text
_TRAILING = re.compile(r"[.?!]+$")
_NUMBER_WORDS = {
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve", "fifteen", "twenty", "thirty", "forty", "fifty", "hundred", "thousand",
    "first", "second", "third", "fourth", "fifth",
}  # fmt: skip


@dataclass(frozen=True)
class Turn:
    """A previous question of the conversation and what became of it."""

    question: str
    search_query: str = ""  # what it was searched as ("" when unknown: the question itself)
    answer: str = ""  # the answer's text, when it was answered
    answered: bool = False  # it got a complete answer (not a refusal, not an error)
    cited_document_ids: tuple[int, ...] = ()
    # The documents whose text reached its answer (cited or not; chat.models.DocumentGiven):
    # what a later answer given this turn draws on too.
    given_document_ids: tuple[int, ...] = ()

    @property
    def query(self) -> str:
        return self.search_query or self.question


@dataclass(frozen=True)
class SearchPlan:
    """How to search for a question: `query` first; when it fails the evidence check,
    `fallback` once: the question read in context when `query` is the question as written;
    the question as written when `query` is its reading in context (or, after a language
    model's rewrite, the reading of this module: chat/answering/generative.py)."""

    query: str
    fallback: str | None = None
    fallback_within: tuple[int, ...] = ()  # the fallback searches only these documents
    contextual: bool = False  # `query` is the question read in context
    prefer_documents: tuple[int, ...] = field(default=())


def search_plan(
    question: str, previous: Sequence[Turn], *, rarity: Callable[[str], float] | None = None
) -> SearchPlan:
    """The search for `question` given the previous turns of its conversation (oldest first).

    `rarity` (a word → how rare it is in the knowledge base, e.g. its IDF) decides which of the
    context's words are carried over when there are too many; without it, the first."""
    if not previous:
        return SearchPlan(query=question)
    last = previous[-1]
    prefer = _subject_documents(previous)
    if asks_for_more(question) and last.answered:
        # "Anything else?": what the previous question was searched as, within its documents.
        return SearchPlan(
            query=last.query,
            fallback=question,
            fallback_within=prefer,
            contextual=True,
            prefer_documents=prefer,
        )
    contextual = contextual_query(question, previous, rarity=rarity)
    if contextual == question:
        return SearchPlan(query=question)
    if answers_the_assistant(question):
        # "Yes, I am a veteran": in context first; as written it may still mean something.
        return SearchPlan(
            query=contextual, fallback=question, contextual=True, prefer_documents=prefer
        )
    if leans_on_conversation(question):
        # As written it means little: searched so only within what the conversation is about.
        return SearchPlan(
            query=contextual,
            fallback=question,
            fallback_within=prefer,
            contextual=True,
            prefer_documents=prefer,
        )
    if _continues(question, last):
        return SearchPlan(
            query=contextual, fallback=question, contextual=True, prefer_documents=prefer
        )
    return SearchPlan(query=question, fallback=contextual, prefer_documents=prefer)


def asks_for_more(question: str) -> bool:
    """The question only asks for more of the same ("anything else?", "tell me more", "what
    else should I know?"): no content word of its own, and a word that asks for more."""
    words = {word.lower() for word in WORD.findall(question)}
    own = [word for word in _content_words(question) if word.lower() not in _CONVERSATIONAL]
    return bool(words & _MORE) and not own


def said_before(question: str, search_query: str, previous: Sequence[Turn]) -> str:
    """The previous answer, when `question` was read in context (`search_query` is not the
    question) after an answered question: its answer's sentences are where the follow-up's
    answer is likely to go on from. Empty otherwise."""
    if search_query == question or not (previous and previous[-1].answered):
        return ""
    return previous[-1].answer


def answers_the_assistant(question: str) -> bool:
    """The message answers the assistant rather than asking ("yes, I am a veteran", "I'm 70",
    "we want to pay by bank transfer"): it starts like a reply and ends without a question
    mark."""
    return bool(_REPLY_START.search(question)) and not question.rstrip().endswith("?")


def _continues(question: str, previous: Turn) -> bool:
    """The question picks up a word of the previous question or of its answer ("the album",
    "the treaty"): the conversation goes on about the same thing."""
    own = set(terms(" ".join(_content_words(question))))
    said = set(terms(" ".join(_content_words(f"{previous.query} {previous.answer}"))))
    return bool(own & said)


def _subject_documents(previous: Sequence[Turn]) -> tuple[int, ...]:
    """The documents the latest answered turn cited."""
    for turn in reversed(previous):
        if turn.answered and turn.cited_document_ids:
            return turn.cited_document_ids
    return ()


def leans_on_conversation(question: str) -> bool:
    """Whether the question needs the conversation to be understood (see the module doc)."""
    return (
        bool(_CONTINUATION_START.search(question)) or not terms(question) or _refers_back(question)
    )


def _refers_back(question: str) -> bool:
    cleaned = _NON_ANAPHORIC.sub(" ", question)
    return bool({word.lower() for word in WORD.findall(cleaned)} & _ANAPHORS)


@cpu_stage("evidence")
def unknown_own_terms(question: str, *, reader: Reader) -> list[str]:
    """The question's own words that what `reader` may search has never held, as written
    (typos of known words and numbers excused: knowledge/vocabulary.py; words that point back,
    ask for more or converse rather than name anything excused too: "anything else?",
    "yes, I'm 70", "how long …?"). Reads the database."""
    return [
        term.token
        for term in question_terms(question, reader=reader).unknown
        if not _names_nothing(term.token)
    ]


def _names_nothing(word: str) -> bool:
    lower = word.lower()
    return (
        lower in STOP_WORDS
        or lower in _ANAPHORS
        or lower in _ABOUT_THE_CONVERSATION
        or lower in _CONVERSATIONAL
    )


def contextual_query(
    question: str, previous: Sequence[Turn], *, rarity: Callable[[str], float] | None = None
) -> str:
    """The follow-up searched with its conversation's context: the question that opened the
    current topic (the latest one searched as written) and the previous question, less the
    words the follow-up replaces, then the follow-up, as written (CONTEXT_AS_WRITTEN; else
    their content words, at most MAX_CARRIED_TERMS of the context's, the rarest). The question
    itself when the context holds no content word it lacks.

    An elliptical follow-up ("And in London?", "What about 2019?") replaces the previous names
    or numbers with its own; one that refers back ("What did she do at Stanford?") keeps them:
    they are what "she" is."""
    if not previous:
        return question
    last = previous[-1]
    topic = next((turn for turn in reversed(previous) if turn.query == turn.question), last)
    context = topic.question if topic is last else f"{topic.question} {last.question}"
    own = _content_words(question)
    own_stems = {terms(word)[0] for word in own if terms(word)}
    elliptical = not _refers_back(question)
    replaces_names = elliptical and any(_is_name(word, question) for word in own)
    replaces_numbers = elliptical and any(_is_number(word) for word in own)
    carried: list[str] = []
    replaced: set[str] = set()
    for word in _content_words(context):
        stem = terms(word)[0] if terms(word) else word.lower()
        if stem in own_stems:
            continue
        if (replaces_names and _is_name(word, context)) or (replaces_numbers and _is_number(word)):
            replaced.add(word)
            continue
        carried.append(word)
    if not carried:
        return question
    if CONTEXT_AS_WRITTEN:
        kept = []
        for word in context.split():
            if _WORD_EDGE.sub("", word) not in replaced:
                kept.append(word)
            elif kept and (end := _TRAILING.search(word)):  # "Lisbon?" → "?"
                kept[-1] += end.group(0)
        return " ".join([*kept, question.strip()])
    carried = _rarest(carried, MAX_CARRIED_TERMS, rarity)
    return " ".join([*carried, *own])


def _rarest(words: list[str], limit: int, rarity: Callable[[str], float] | None) -> list[str]:
    """At most `limit` of `words`, the rarest (the first without `rarity`), in their order."""
    if len(words) <= limit:
        return words
    order = sorted(range(len(words)), key=lambda i: -rarity(words[i]) if rarity else i)
    return [words[i] for i in sorted(order[:limit])]


def _content_words(text: str) -> list[str]:
    """The words of `text` that are not stop words, anaphors, words about the conversation
    itself or a reply's "yes"/"I'm", as written, in order, once."""
    words = []
    for word in WORD.findall(text):
        lower = word.lower()
        if (
            lower in STOP_WORDS
            or lower in _ANAPHORS
            or lower in _ABOUT_THE_CONVERSATION
            or lower in _REPLY_WORDS
            or (len(word) < 2 and not word.isdigit())
        ):
            continue
        words.append(word)
    return list(dict.fromkeys(words))


def _is_name(word: str, text: str) -> bool:
    """A capitalised word that does not merely start the text."""
    if not word[:1].isupper():
        return False
    first = WORD.search(text)
    return not (first and first.group(0) == word and not word[1:].isupper() and word.istitle())


def _is_number(word: str) -> bool:
    return bool(_NUMBER.match(word)) or word.lower() in _NUMBER_WORDS


@cpu_stage("plan")
def search_plan_in_context(
    question: str, previous: Sequence[Turn], *, reader: Reader
) -> SearchPlan:
    """`search_plan` with, for the content-word reading (CONTEXT_AS_WRITTEN 0), the term rarity
    (the vocabulary's IDF) of what `reader` may search: it then reads the database (the
    vocabulary is cached per process)."""
    if CONTEXT_AS_WRITTEN:
        return search_plan(question, previous)
    vocabulary = vocabulary_get(reader=reader)
    return search_plan(question, previous, rarity=vocabulary.idf)
