"""Withheld answers: a shared conversation in which an answer cites a restricted collection
(docs/decisions/0080-withheld-answers.md), opened by each kind of reader: the collection's
readers by group and by user (and the asker), staff who may not read it, a superuser, a
document manager outside the collection, non-staff and anonymous visitors × the conversation
page (its hover cards, sources and copy text), its messages API, history search and
feedback. The restricted text is looked for in the raw response bodies. Revocation and
withdrawn documents (disabled, expired, deleted) are decided on the next request. The
WebSocket: test_access_matrix_withheld_ws.py."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

from chat.models import Conversation, Feedback
from chat.transcript import conversation_transcript
from chat.withheld import Withheld, messages_withheld
from knowledge.collections import collection_create
from knowledge.models import collection_default_id
from tests.support.conversations import exchange_create
from tests.support.knowledge_base import document_create
from tests.support.readers import readers_create

pytestmark = pytest.mark.django_db

QUESTION = "What is the salary band for a Grade 7 analyst?"
RESTRICTED_CHUNK = "The Quetzal band for Grade 7 analysts runs from 41,000 to 48,000 pounds."
RESTRICTED_ANSWER = "Grade 7 analysts are paid on the Quetzal band, 41,000 to 48,000 pounds. [1]"
SECRET = "Quetzal"  # in the restricted chunk and answer only: never in the question or title
OPEN_QUESTION = "How often is the lens wound?"
OPEN_CHUNK = "Keepers wind the Tidewater lens clockwork every four hours."
OPEN_ANSWER = "The Tidewater lens is wound every four hours. [1]"

ACCESS_NOTICE = Withheld.ACCESS.notice
WITHDRAWN_NOTICE = Withheld.WITHDRAWN.notice

ROLES = ["asker", "reader by group", "reader by user", "staff", "superuser",
         "document manager", "non-staff", "anonymous"]  # fmt: skip
READS = {"asker", "reader by group", "reader by user", "superuser"}


@pytest.fixture
def people(db):
    return readers_create()


@pytest.fixture
def shared(people):
    """A shared conversation of the asker: an answer from the HR-only collection, then one from
    General."""
    hr_only = collection_create(
        name="HR only", groups=[people["hr"]], users=[people["reader by user"]]
    )
    pay = document_create(title="Pay bands", texts=[RESTRICTED_CHUNK], collection=hr_only)
    keepers = document_create(title="Keepers", texts=[OPEN_CHUNK])
    conversation = Conversation.objects.create(
        owner=people["asker"], is_private=False, title=QUESTION
    )
    question, answer = exchange_create(
        conversation, question=QUESTION, answer=RESTRICTED_ANSWER, cited=list(pay.chunks.all())
    )
    _, open_answer = exchange_create(
        conversation,
        question=OPEN_QUESTION,
        answer=OPEN_ANSWER,
        cited=list(keepers.chunks.all()),
    )
    return {"conversation": conversation, "question": question, "answer": answer,
            "open_answer": open_answer, "document": pay, "collection": hr_only}  # fmt: skip


def client_for(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def page(client: Client, shared) -> tuple[int, str]:
    response = client.get(f"/c/{shared['conversation'].pk}/")
    return response.status_code, response.content.decode()


def messages_api(client: Client, shared) -> tuple[int, str]:
    response = client.get(f"/api/conversations/{shared['conversation'].pk}/messages")
    return response.status_code, response.content.decode()


PAGE = {"non-staff": 403, "anonymous": 302}
API = {"non-staff": 403, "anonymous": 401}


@pytest.mark.parametrize("role", ROLES)
def test_the_shared_page_shows_the_restricted_answer_only_to_its_readers(people, shared, role):
    status, body = page(client_for(people[role]), shared)

    assert status == PAGE.get(role, 200)
    assert (SECRET in body) == (role in READS)
    if status != 200:
        return
    # The question and the unrestricted answer stay visible to every reader.
    assert QUESTION in body
    assert "Tidewater" in body
    if role in READS:
        # The hover card and the sources block carry the cited text; the copy text the answer.
        assert RESTRICTED_CHUNK in body
        assert 'data-copy="Grade 7 analysts are paid on the Quetzal band' in body
        assert "data-withheld" not in body
    else:
        assert ACCESS_NOTICE.replace("'", "&#x27;") in body
        assert f'data-withheld="{Withheld.ACCESS}"' in body
        assert "Pay bands" not in body  # not even the cited document's title
        assert "41,000" not in body


@pytest.mark.parametrize("role", ROLES)
def test_the_messages_api_withholds_the_restricted_answer_from_who_may_not_read(
    people, shared, role
):
    status, body = messages_api(client_for(people[role]), shared)

    assert status == API.get(role, 200)
    assert (SECRET in body) == (role in READS)
    if status != 200:
        return
    messages = {m["id"]: m for m in json.loads(body)["messages"]}
    answer = messages[str(shared["answer"].pk)]
    assert messages[str(shared["question"].pk)]["content"] == QUESTION
    assert messages[str(shared["open_answer"].pk)]["content"] == OPEN_ANSWER
    if role in READS:
        assert answer["withheld"] == ""
        assert answer["citations"][0]["title"] == "Pay bands"
    else:
        assert answer == {**answer, "content": ACCESS_NOTICE, "citations": [],
                          "withheld": "access", "search_query": "", "warning": ""}  # fmt: skip
        assert "Pay bands" not in body


HISTORY = {"non-staff": 403, "anonymous": 302}


@pytest.mark.parametrize("role", ROLES)
def test_history_search_matches_the_restricted_answer_only_for_its_readers(people, shared, role):
    client = client_for(people[role])

    response = client.get("/history/", {"q": SECRET})
    body = response.content.decode()

    assert response.status_code == HISTORY.get(role, 200)
    # The page repeats the query: the answer's own words around it are the snippet.
    assert ("Quetzal band, 41,000" in body) == (role in READS)
    if response.status_code == 200:
        assert (body.count("data-history-item") == 1) == (role in READS)
        # The question (the title) still finds it for everyone.
        assert client.get("/history/", {"q": "Grade 7"}).text.count("data-history-item") == 1


FEEDBACK = {
    # role → (api, page) on the restricted answer
    "non-staff": (403, 403),
    "anonymous": (401, 302),
    "staff": (404, 404),  # like a message that does not exist
    "document manager": (404, 404),
}


@pytest.mark.parametrize("role", ROLES)
def test_feedback_on_a_withheld_answer_answers_like_a_nonexistent_message(people, shared, role):
    client = client_for(people[role])
    answer = shared["answer"].pk

    api = client.post(
        f"/api/messages/{answer}/feedback",
        json.dumps({"rating": "up"}),
        content_type="application/json",
    )
    html = client.post(f"/messages/{answer}/feedback/", {"rating": 1})

    assert (api.status_code, html.status_code) == FEEDBACK.get(role, (200, 200))
    assert SECRET not in api.content.decode() + html.content.decode()
    stored = Feedback.objects.filter(message_id=answer).exists()
    assert stored == (role in READS)
    if role in {"staff", "document manager"}:
        missing = client.post(
            "/api/messages/00000000-0000-0000-0000-000000000000/feedback",
            json.dumps({"rating": "up"}),
            content_type="application/json",
        )
        assert api.json() == missing.json()


def test_removed_from_the_group_the_answer_is_withheld_on_the_next_request(people, shared):
    client = client_for(people["reader by group"])
    assert SECRET in page(client, shared)[1]

    people["reader by group"].groups.remove(people["hr"])

    assert SECRET not in page(client, shared)[1]
    assert SECRET not in messages_api(client, shared)[1]
    # And the asker, once out of HR, no longer reads their own earlier answer.
    people["asker"].groups.remove(people["hr"])
    assert SECRET not in page(client_for(people["asker"]), shared)[1]


def test_moving_the_document_to_general_shows_the_answer_on_the_next_request(people, shared):
    client = client_for(people["staff"])
    assert SECRET not in page(client, shared)[1]

    document = shared["document"]
    document.collection_id = collection_default_id()
    document.save(update_fields=["collection"])

    assert SECRET in page(client, shared)[1]


@pytest.fixture
def withdrawn_answer(people):
    """A shared answer citing a General document, for withdrawing it."""
    document = document_create(title="Keepers' pay", texts=[RESTRICTED_CHUNK])
    conversation = Conversation.objects.create(owner=people["asker"], title=QUESTION)
    _, answer = exchange_create(
        conversation, question=QUESTION, answer=RESTRICTED_ANSWER, cited=list(document.chunks.all())
    )
    return {"conversation": conversation, "answer": answer, "document": document}


@pytest.mark.parametrize("how", ["disabled", "expired"])
def test_a_withdrawn_document_withholds_its_answers_from_all_but_document_managers(
    people, withdrawn_answer, how
):
    document = withdrawn_answer["document"]
    staff, manager = client_for(people["staff"]), client_for(people["document manager"])
    assert SECRET in page(staff, withdrawn_answer)[1]

    if how == "disabled":
        document.enabled = False
    else:
        document.expires_at = timezone.now() - timedelta(minutes=1)
    document.save()

    status, body = page(staff, withdrawn_answer)
    assert status == 200
    assert SECRET not in body
    assert WITHDRAWN_NOTICE in body
    assert SECRET not in messages_api(staff, withdrawn_answer)[1]
    assert SECRET in page(manager, withdrawn_answer)[1]
    assert SECRET in messages_api(manager, withdrawn_answer)[1]
    assert SECRET in page(client_for(people["superuser"]), withdrawn_answer)[1]


def test_a_deleted_document_withholds_its_answers_from_all_but_superusers(people, withdrawn_answer):
    withdrawn_answer["document"].delete()  # the citation keeps its snapshot, not its chunk

    for role in ("staff", "document manager", "asker"):
        status, body = page(client_for(people[role]), withdrawn_answer)
        assert status == 200
        assert SECRET not in body
        assert WITHDRAWN_NOTICE in body
    assert SECRET in page(client_for(people["superuser"]), withdrawn_answer)[1]


def test_a_replaced_document_keeps_its_older_snapshot_readable_by_its_readers(
    people, withdrawn_answer
):
    from tests.support.knowledge_base import chunks_replace

    chunks_replace(withdrawn_answer["document"], texts=["A newer version of the pay text."])

    body = page(client_for(people["staff"]), withdrawn_answer)[1]
    assert SECRET in body
    assert "data-withheld" not in body


def test_withheld_messages_are_decided_in_one_query_for_a_whole_conversation(
    people, shared, django_assert_num_queries
):
    conversation = shared["conversation"]
    for n in range(20):
        exchange_create(
            conversation,
            question=f"Question {n}",
            answer=RESTRICTED_ANSWER,
            cited=list(shared["document"].chunks.all()),
        )

    with django_assert_num_queries(2):  # the reader, then every message's reason
        withheld = messages_withheld(user=people["staff"], conversation_id=conversation.pk)
    assert len(withheld) == 21
    assert set(withheld.values()) == {Withheld.ACCESS}
    with django_assert_num_queries(4):  # the reader, citations, messages, withheld
        rows = conversation_transcript(conversation, user=people["staff"])
    assert not any(SECRET in row.content for row in rows)


def test_a_follow_up_remembers_only_the_answers_its_asker_may_read_now(people, shared):
    from chat.turns import conversation_memory, conversation_turns_before
    from knowledge.access import reader_for
    from tests.support.statements import statements_recorded

    conversation = shared["conversation"]
    asked, _ = exchange_create(conversation, question="And for Grade 8?", answer="")

    def remembered() -> list[str]:
        turns = conversation_turns_before(asked, limit=10)
        older = conversation_memory(asked.pk, window=0).unfolded
        assert [t.answer for t in turns] == [t.answer for _, t in older]
        # With the asker's Reader (as the pipeline passes it): the same turns, the withheld
        # check in the turns' one statement; someone else's Reader does not stand for the
        # owner's (the owner's is read).
        asker = reader_for(people["asker"])
        with statements_recorded() as statements:
            with_asker = conversation_turns_before(asked, limit=10, asker=asker)
        assert with_asker == turns and len(statements) == 1
        someone_else = reader_for(people["reader by user"])
        assert conversation_turns_before(asked, limit=10, asker=someone_else) == turns
        return [t.answer for t in turns]

    assert remembered() == [RESTRICTED_ANSWER, OPEN_ANSWER]

    people["asker"].groups.remove(people["hr"])

    assert remembered() == ["", OPEN_ANSWER]
    turn = conversation_turns_before(asked, limit=10)[0]
    assert (turn.answered, turn.cited_document_ids, turn.question) == (False, (), QUESTION)


def _admin_shows(client: Client, url: str, needle: str) -> bool:
    response = client.get(url, follow=True)
    assert response.status_code == 200, url
    body = response.content.decode()
    # A search page repeats its query: only what it lists counts.
    body = body.replace(f'value="{SECRET}"', "").replace(f"q={SECRET}", "")
    return needle in body.replace(f"“{SECRET}”", "")


@pytest.mark.parametrize("role", ["reader by group", "staff", "document manager", "superuser"])
def test_the_admin_shows_a_withheld_answer_to_nobody_it_is_withheld_from(people, shared, role):
    user = people[role]
    for codename in ("view_conversation", "view_message", "view_feedback"):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    Feedback.objects.create(user=people["asker"], message=shared["answer"], rating=1)
    client = client_for(user)
    answer = f"/admin/chat/message/{shared['answer'].pk}/change/"
    conversation = f"/admin/chat/conversation/{shared['conversation'].pk}/change/"
    reads = role in READS

    assert _admin_shows(client, "/admin/chat/message/", answer) == reads
    assert _admin_shows(client, f"/admin/chat/message/?q={SECRET}", answer) == reads
    assert _admin_shows(client, answer, SECRET) == reads  # else "doesn't exist"
    assert _admin_shows(client, conversation, SECRET) == reads  # its messages inline
    assert _admin_shows(client, f"/admin/chat/conversation/?q={SECRET}", conversation) == reads
    # The feedback list names the answer's sources.
    assert _admin_shows(client, "/admin/chat/feedback/?rating=all", "Pay bands") == reads
    # The conversation itself, and its question, stay visible to all of them.
    assert _admin_shows(client, conversation, QUESTION)


def test_a_replayed_answer_carries_nothing_of_the_answer_for_who_may_not_read_it(people, shared):
    """What a repeated message id replays, over SSE (`/api/chat`) as over the WebSocket."""
    from chat.answering.replay import stored_answer_events
    from chat.selectors import message_answer_with_citations

    answer = message_answer_with_citations(shared["answer"].pk)

    readable = json.dumps([e.data for e in stored_answer_events(answer, user=people["asker"])])
    people["asker"].groups.remove(people["hr"])
    events = stored_answer_events(answer, user=people["asker"])

    assert SECRET in readable
    assert SECRET not in json.dumps([e.data for e in events])
    assert "Pay bands" not in json.dumps([e.data for e in events])
    assert [e.type for e in events] == ["answer_start", "answer_delta", "sources", "answer_end"]
    assert events[1].data == {"text": ACCESS_NOTICE}
    assert events[2].data["citations"] == []
    assert events[3].data["withheld"] == events[0].data["withheld"] == "access"
