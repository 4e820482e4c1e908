"""What one question costs does not grow with the library: a restricted reader with a personal
file asks a follow-up that names a document over a WebSocket, with 10 documents in the
knowledge base and again with 10,000 more (and someone else's 10,000 private conversations,
and 300 other teams' collections); the statements and the rows they return (what the server's
Python reads) are the same, and each statement reads as many rows in PostgreSQL, within a few
(docs/decisions/0150-answer-cost-per-question.md). Counted, not timed. Run with `-s` to see
the statements."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import timedelta

import pytest
from asgiref.sync import AsyncToSync, SyncToAsync, sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.test import AsyncClient
from django.utils import timezone
from rest_framework.authtoken.models import Token

from chat.answering.named_documents import named_document_find
from chat.answering.named_index import names_index_forget
from chat.answering.turns_gate import answer_turn
from chat.models import Attachment, Conversation
from knowledge import embedding, vocabulary
from knowledge.access import reader_for, reader_of_all_staff
from knowledge.models import Collection, Document, collection_default_id
from knowledge.vocabulary import text_search_parse, vocabulary_get
from tests.support.clients import fragments_until_idle, send_payload, socket_for, socket_scoped
from tests.support.knowledge_base import EXPENSES_TEXTS, LEAVE_TEXTS, document_create
from tests.support.personal import personal_file_create
from tests.support.readers import readers_create
from tests.support.statements import Statements, rows_read, statements_recorded

pytestmark = pytest.mark.django_db(transaction=True)

FIRST_QUESTION = "How many days of paid annual leave do full-time employees receive?"
# Leans on the conversation and names a document: every feature of a question at once.
FOLLOW_UP = "And what does the staff handbook say about carrying them over?"
LIBRARY_GROWTH = 10_000
WITHDRAWN_GROWTH = 2_000
OTHER_TEAMS = 300


def _scenario() -> dict:
    readers = readers_create(with_outsiders=False)
    hr_only = Collection.objects.create(name="HR only", all_staff=False)
    hr_only.reader_groups.add(readers["hr"])
    document_create(title="Staff handbook", texts=LEAVE_TEXTS, pages=[3, 4])
    document_create(title="Expenses policy", texts=EXPENSES_TEXTS)
    document_create(
        title="Pay bands",
        texts=["A Grade 7 analyst is paid between 41,000 and 48,000 euros a year."],
        collection=hr_only,
    )
    return readers


def _library_grow(count: int) -> None:
    """`count` more ready documents in General and in a collection of their own (titles of
    their own, no chunks: what the question's work must not scan), half of them with an
    expiry date ahead; WITHDRAWN_GROWTH more withdrawn, half expired and half disabled;
    `count` private conversations of someone else (not shown to the asker); and OTHER_TEAMS
    groups, each with a member and a collection only it reads."""
    other = Collection.objects.create(name="Archive", all_staff=True)
    general = collection_default_id()
    later = timezone.now() + timedelta(days=365)
    Document.objects.bulk_create(
        [
            Document(
                title=f"Archived minutes {number} of the {('north', 'south')[number % 2]} site",
                source=f"test:archive/{number}.md",
                media_type="text/markdown",
                content_hash=hashlib.sha256(str(number).encode()).hexdigest(),
                status=Document.Status.READY,
                collection_id=general if number % 2 else other.pk,
                expires_at=later if number % 4 < 2 else None,
            )
            for number in range(count)
        ],
        batch_size=2000,
    )
    # Withdrawn documents, which no search may read: expired a week ago, or disabled.
    Document.objects.bulk_create(
        [
            Document(
                title=f"Withdrawn notes {number}",
                source=f"test:withdrawn/{number}.md",
                media_type="text/markdown",
                content_hash=hashlib.sha256(f"withdrawn {number}".encode()).hexdigest(),
                status=Document.Status.READY,
                enabled=bool(number % 2),
                collection_id=general,
                expires_at=timezone.now() - timedelta(days=7) if number % 2 else None,
            )
            for number in range(WITHDRAWN_GROWTH)
        ],
        batch_size=2000,
    )
    someone = get_user_model().objects.create_user(username="someone", is_staff=True)
    Conversation.objects.bulk_create(
        [Conversation(owner=someone, title=f"Notes {n}", is_private=True) for n in range(count)],
        batch_size=2000,
    )
    # Other people's groups and the collections only they read.
    groups = Group.objects.bulk_create([Group(name=f"Team {n}") for n in range(OTHER_TEAMS)])
    members = get_user_model().objects.bulk_create(
        [get_user_model()(username=f"member{n}", is_staff=True) for n in range(OTHER_TEAMS)]
    )
    for number, (group, member) in enumerate(zip(groups, members, strict=True)):
        Collection.objects.create(name=f"Team {number}", all_staff=False).reader_groups.add(group)
        member.groups.add(group)
    with connection.cursor() as cursor:
        for model in (Document, Conversation, Collection, Group, get_user_model()):
            cursor.execute(f"ANALYZE {model._meta.db_table}")


def _rows_read_each(statements: Statements) -> list[int | None]:
    """The rows each read-only statement of `statements` reads when run again now
    (`rows_read`; None for the others)."""
    return [run and rows_read(*run) for run in statements.runs]


async def _ask(conversation_id: uuid.UUID, user, question: str):
    payload = {"action": "send", "message": question, "message_id": str(uuid.uuid4())}
    communicator = await socket_scoped(user, conversation_id)  # its session stored first
    with statements_recorded() as statements:
        connected, _ = await communicator.connect()
        assert connected
        try:
            await communicator.send_to(text_data=json.dumps(payload))
            fragments = []
            while True:
                fragment = await communicator.receive_from(timeout=30)
                fragments.append(fragment)
                if 'id="chat-state"' in fragment and 'data-busy="false"' in fragment:
                    break
        finally:
            await communicator.disconnect()
    return statements, "".join(fragments)


async def _conversation(asker, attached) -> tuple[Statements, str]:
    """The follow-up's statements and page fragments, in a new conversation whose first
    question was answered and to which the asker's personal file is attached."""
    conversation_id = uuid.uuid4()
    _, page = await _ask(conversation_id, asker, FIRST_QUESTION)
    assert "25 days" in page
    await sync_to_async(Attachment.objects.create)(
        conversation=await Conversation.objects.aget(pk=conversation_id), document=attached
    )
    return await _ask(conversation_id, asker, FOLLOW_UP)


async def test_a_question_costs_the_same_with_ten_and_ten_thousand_documents(monkeypatch):
    readers = await sync_to_async(_scenario)()
    # Two askers of the same kind (HR, a personal file each), one per library size.
    asker, second_asker = readers["asker"], readers["reader by group"]
    attached, second_attached = [
        await sync_to_async(personal_file_create)(
            user, title="My contract", texts=["My notice period is three months."]
        )
        for user in (asker, second_asker)
    ]
    await sync_to_async(vocabulary_get)(reader=await sync_to_async(reader_of_all_staff)())
    monkeypatch.setattr(vocabulary, "RECHECK_SECONDS", 3600.0)
    await sync_to_async(embedding.embed_query)("warm up")

    small, page = await _conversation(asker, attached)
    assert "Searched in: Staff handbook" in page and "31 March" in page
    small_read = await sync_to_async(_rows_read_each)(small)
    text_search_parse.cache_clear()
    await Conversation.objects.all().adelete()  # each page's sidebar lists one conversation

    await sync_to_async(_library_grow)(LIBRARY_GROWTH)
    names_index_forget()  # the index sees the new documents at the next question
    large, page = await _conversation(second_asker, second_attached)
    assert "Searched in: Staff handbook" in page and "31 March" in page
    large_read = await sync_to_async(_rows_read_each)(large)
    # The index holds the new documents (here named, for a reader of the General ones only).
    named = await sync_to_async(named_document_find)(
        "What do the archived minutes 4321 of the south site say?",
        reader=await sync_to_async(reader_for)(readers["staff"]),
    )
    assert named is not None and named.title == "Archived minutes 4321 of the south site"

    print(f"\n10 documents: {len(small)} statements, {small.rows} rows")
    print(f"{LIBRARY_GROWTH} more: {len(large)} statements, {large.rows} rows")
    for number, (statement, rows, before) in enumerate(
        zip(large, large.rows_each, small.rows_each, strict=False), 1
    ):
        print(
            f"{number:3d}. {rows} rows ({before} with 10), reads "
            f"{large_read[number - 1]} ({small_read[number - 1]}). {statement[:140]}"
        )
    assert len(large) == len(small)
    assert large.rows == small.rows
    # What each statement reads, its filtered-out rows included (not only what it returns):
    # the documents with an expiry date ahead, the withdrawn ones and the others' private
    # conversations are never walked (docs/decisions/0176, 0177, 0179).
    for number, (grown, before) in enumerate(zip(large_read, small_read, strict=True), 1):
        assert (grown is None) == (before is None), number
        assert grown is None or grown <= before + READ_SLACK, (number, grown, before)
    # The asker's Reader is read once for the message (the socket's admission) and passed to
    # the search, the earlier turns' withheld check and the final render's
    # (docs/decisions/0151-one-reader-per-question.md): three times before.
    for statements in (small, large):
        assert len([s for s in statements if READER_STATEMENT in s]) == 1
    assert len(small) <= STATEMENTS_MAX


# Rows a statement may read beyond what it read with 10 documents (a chunk or a conversation
# more in the ranking's or the sidebar's ties, which differ between the two askers' pages).
READ_SLACK = 10
# A fragment of knowledge.access._reader_sql, the Reader's one statement.
READER_STATEMENT = "WHERE owner_id = u.id),"
# The follow-up from connect to close, the session and user read again for the message
# (docs/decisions/0140) included: 33 before the Reader was passed down (0151), 26 since 0152,
# 25 with the earlier turns' withheld check in their statement (0150).
STATEMENTS_MAX = 25


# Calls to another thread (`sync_to_async`, `database_sync_to_async`) for one question on an open
# socket, from its message to the lock's release: 17 for a follow-up read in context before the
# second embedding and Channels' connection clean-up hop went, 15 after; 16 with the lexical
# ranking run while the question is embedded (docs/decisions/0150); 13 since the session is
# checked on the admission's hop, the search planned on the store's and the lock released on
# the sources' (11 for a first question, 12 for one searched as written); 8 since the evidence
# check runs on its retrieval's hop, the extractive answer is written on the hop recording what
# it was given, and the sidebar of an answer written whole comes on its sources' hop (7 for a
# first question, whose embedding no lexical ranking waits beside).
HOPS_MAX = 8


async def test_a_question_is_embedded_once_whether_or_not_it_is_read_in_context(
    monkeypatch, settings
):
    """The first question of a conversation is embedded while it is stored; a later one once
    its search is planned, as written or read in context, never both
    (docs/decisions/0150-answer-cost-per-question.md). And the thread hops of each, counted."""
    settings.CHAT_FLOOD_MIN_INTERVAL = 0  # five questions back to back
    readers = await sync_to_async(readers_create)(with_outsiders=False)
    await sync_to_async(document_create)(title="Staff handbook", texts=LEAVE_TEXTS, pages=[3, 4])
    await sync_to_async(document_create)(title="Expenses policy", texts=EXPENSES_TEXTS)
    embedded: list[str] = []
    embed_query = embedding.embed_query

    alone: list[bool] = []

    def counted(text: str, **options):
        embedded.append(text)
        alone.append(options.get("alone", False))
        return embed_query(text, **options)

    monkeypatch.setattr(embedding, "embed_query", counted)
    hops: list[str] = []
    hop = SyncToAsync.__call__

    def hop_counted(self, *args, **kwargs):
        hops.append(getattr(self.func, "__name__", repr(self.func)))
        return hop(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", hop_counted)
    communicator = await socket_for(readers["staff"], uuid.uuid4())
    asked = []
    for question in (
        FIRST_QUESTION,
        "How many days of annual leave can be carried over?",  # read in context
        "How much is the daily meal allowance while travelling?",  # as written
    ):
        embedded.clear()
        hops.clear()
        await communicator.send_to(text_data=send_payload(question))
        page = "".join(await fragments_until_idle(communicator))
        await communicator.receive_nothing(timeout=0.2)  # the lock released after the end
        print(f"{question}: {len(hops)} hops: {', '.join(hops)}")
        assert len(hops) <= HOPS_MAX and "close_old_connections" not in hops
        assert hops[:2] == ["_admit", "exchange_store_then"] and hops[-1] == "_released_after"
        if question != FIRST_QUESTION:  # embedded after its plan (the first may be done then)
            # Its lexical ranking runs while it is embedded, before the rest of retrieval.
            assert hops.index("_lexical_ahead") < hops.index("_retrieve_assessed")
        asked.append((list(embedded), page))
    # A refusal releases the conversation's lock on its sidebar's hop (before its final
    # render's), as an answer does on its sources'.
    hops.clear()
    await communicator.send_to(text_data=send_payload("What is the capital of Mongolia?"))
    refused = "".join(await fragments_until_idle(communicator))
    await communicator.receive_nothing(timeout=0.2)
    assert 'data-status="refused"' in refused
    assert hops[-2:] == ["_released_after", "final_html"] and "in_flight_release" not in hops
    # While another answer holds a turn, a question's embedding may be joined by another's.
    asked_alone = len(alone)
    other = await answer_turn()
    embedded.clear()
    await communicator.send_to(text_data=send_payload("Who approves exceptions?"))
    await fragments_until_idle(communicator)
    other.end()
    await communicator.disconnect()
    # The batcher waits for company only then.
    assert all(alone[:asked_alone]) and alone[asked_alone:] and not any(alone[asked_alone:])

    (first, first_page), (in_context, context_page), (as_written, written_page) = asked
    assert first == [FIRST_QUESTION] and "25 days" in first_page
    assert len(in_context) == 1
    assert FIRST_QUESTION.rstrip("?") in in_context[0]  # the question read with its conversation
    assert "31 March" in context_page
    assert as_written == ["How much is the daily meal allowance while travelling?"]
    assert "45 euros" in written_page


# Calls to another thread for one question over SSE, from the request to the stream's end: the
# request_started signal; the middleware above `SignInAgeMiddleware`, which is synchronous, on
# one hop, and one back; CSRF's view check; then the answer's own (admission, store, lexical
# ranking, embedding, retrieval, record, finish): 10 for a conversation's first question, 11
# for a later one (its lexical ranking run ahead). 13 and 14 while the messages and
# X-Frame-Options middleware ran below it, in async mode: a hop for each of their hooks
# (docs/decisions/0173-middleware-on-one-hop.md).
SSE_HOPS_MAX = 11


async def test_an_sse_question_pays_no_hop_for_a_middleware_hook(monkeypatch):
    readers = await sync_to_async(readers_create)(with_outsiders=False)
    await sync_to_async(document_create)(title="Staff handbook", texts=LEAVE_TEXTS, pages=[3, 4])
    token = await sync_to_async(Token.objects.create)(user=readers["staff"])
    await sync_to_async(embedding.embed_query)("warm up")
    hops: list[str] = []
    to_thread, from_thread = SyncToAsync.__call__, AsyncToSync.__call__

    def to_thread_counted(self, *args, **kwargs):
        hops.append(getattr(self.func, "__qualname__", repr(self.func)))
        return to_thread(self, *args, **kwargs)

    def from_thread_counted(self, *args, **kwargs):
        hops.append(getattr(self.awaitable, "__qualname__", repr(self.awaitable)))
        return from_thread(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", to_thread_counted)
    monkeypatch.setattr(AsyncToSync, "__call__", from_thread_counted)
    body = {"message": FIRST_QUESTION, "message_id": str(uuid.uuid4())}
    response = await AsyncClient().post(
        "/api/chat",
        json.dumps(body),
        "application/json",
        headers={"Authorization": f"Token {token.key}"},
    )
    frames = b"".join([chunk async for chunk in response.streaming_content]).decode()

    assert response.status_code == 200 and "25 days" in frames
    print(f"{len(hops)} hops: {', '.join(hops)}")
    middleware_hooks = [hop for hop in hops if "Middleware." in hop]
    assert middleware_hooks == ["CsrfViewMiddleware.process_view"]
    assert len(hops) <= SSE_HOPS_MAX
