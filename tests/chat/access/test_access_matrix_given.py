"""The access matrix's column "given but not cited": answers whose text holds a restricted
passage without citing it (docs/decisions/0130-an-answer-records-what-it-was-given.md), made by
the real pipeline in a shared conversation of a member of HR: a generative answer whose model
(a loopback server speaking the OpenAI protocol) repeats its source without a marker, an
extractive answer stopped mid-sentence (before its marker), a generative answer that broke off
before its marker, a generative follow-up whose prompt held an earlier restricted answer, and
a conversation summary. Each is opened by another staff member, a reader removed from the
group and (for an answer drawing on the asker's personal file) a superuser, on every surface:
the page, the messages API, history search and its snippet, the admin's message list,
feedback, and the WebSocket's replay of the stored answer; the raw bodies and frames are
searched for the restricted text. A reader of the collection (and a superuser for
organisation documents) is the control: the restricted text does reach them."""

from __future__ import annotations

import json
import uuid

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Permission
from django.test import Client

from chat.answering import breaker
from chat.answering.generative import NOT_GROUNDED_NOTICE
from chat.answering.pipeline import answer_stream
from chat.models import ChatSettings, Conversation, Message
from chat.withheld import Withheld
from knowledge.collections import collection_create
from tests.support.answers import collect
from tests.support.clients import fragments_until_idle, socket_for
from tests.support.knowledge_base import document_create
from tests.support.openai_server import Scripted, openai_server
from tests.support.personal import personal_file_create
from tests.support.readers import readers_create

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "What is the salary band for a Grade 7 analyst?"
RESTRICTED_CHUNK = "The Quetzal band for Grade 7 analysts runs from 41,000 to 48,000 pounds."
SECRET = "Quetzal"  # in the restricted passage and what repeats it: never in a question
LEAVE_QUESTION = "How many days of annual leave do full-time employees get?"
MEAL_QUESTION = "What is the daily meal allowance while travelling?"
PASSWORD_QUESTION = "How long must passwords be?"
SUMMARY = "The user asked about pay: Grade 7 analysts are recapitulated on the Quetzal band."
FILE_QUESTION = "How much is the signing bonus paid after the probation period?"
FILE_CHUNK = "The Zanzibarine signing bonus of 7,250 pounds is paid after the probation period."
FILE_SECRET = "Zanzibarine"

ADMIN_PERMISSIONS = ("view_conversation", "view_message", "view_feedback")


@pytest.fixture(autouse=True)
def _fresh_circuit(db):
    breaker.circuit_reset()
    yield
    breaker.circuit_reset()


@pytest.fixture
def llm(settings):
    with openai_server() as server:
        settings.LLM_BACKEND = "openai"
        settings.LLM_BASE_URL = server.base_url
        settings.LLM_MODEL = "test-model"
        settings.LLM_API_KEY = "test-key"
        settings.LLM_TIMEOUT_S = 5
        yield server


@pytest.fixture
def people(policies_kb):
    """Who reads: the asker and "reader by group" in HR, plain "staff", a "superuser"; each
    may open the admin's conversations, messages and feedback. The HR-only collection holds
    the pay bands; General the policies."""
    made = readers_create(with_outsiders=False)
    for role in ("asker", "reader by group", "staff", "superuser"):
        for codename in ADMIN_PERMISSIONS:
            made[role].user_permissions.add(Permission.objects.get(codename=codename))
    hr_only = collection_create(name="HR only", groups=[made["hr"]])
    made["pay"] = document_create(title="Pay bands", texts=[RESTRICTED_CHUNK], collection=hr_only)
    return made


def mode_set(mode: str, **fields) -> None:
    ChatSettings.objects.update_or_create(pk=1, defaults={"generation_mode": mode, **fields})


def ask(user, question: str, conversation_id: uuid.UUID) -> list:
    return async_to_sync(collect)(
        user=user, question=question, conversation_id=conversation_id, is_private=False
    )


def answer_to(question: str, conversation_id: uuid.UUID) -> Message:
    return Message.objects.get(
        conversation_id=conversation_id, role=Message.Role.ASSISTANT, reply_to__content=question
    )


def documents_given(message: Message) -> set[int]:
    from chat.models import DocumentGiven

    return set(DocumentGiven.objects.filter(message=message).values_list("document_id", flat=True))


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def without_echo(body: str, query: str) -> str:
    """A search page's body less the places it repeats its own query: only what it lists
    counts."""
    for echo in (f'value="{query}"', f"q={query}", f"“{query}”"):
        body = body.replace(echo, "")
    return body


def surfaces(user, conversation_id, message: Message, *, searched: str = SECRET) -> dict:
    """What `user` receives of the conversation and of `message` on each surface: raw bodies
    (the search pages less their echo of the query), with the feedback's status."""
    client = client_for(user)
    feedback = client.post(
        f"/api/messages/{message.pk}/feedback",
        json.dumps({"rating": "up"}),
        content_type="application/json",
    )
    return {
        "page": client.get(f"/c/{conversation_id}/").content.decode(),
        "api": client.get(f"/api/conversations/{conversation_id}/messages").content.decode(),
        "history": without_echo(
            client.get("/history/", {"q": searched}).content.decode(), searched
        ),
        "admin list": without_echo(
            client.get("/admin/chat/message/", {"q": searched}).content.decode(), searched
        ),
        "admin page": client.get(
            f"/admin/chat/message/{message.pk}/change/", follow=True
        ).content.decode(),
        "feedback": f"{feedback.status_code} {feedback.content.decode()}",
    }


def replay_frames(user, conversation_id, question: str, question_id) -> list[str]:
    """The frames of the conversation's socket when `user` sends the stored question again
    under its own id: the stored answer is replayed."""

    async def frames() -> list[str]:
        socket = await socket_for(user, conversation_id)
        try:
            await socket.send_to(
                text_data=json.dumps(
                    {"action": "send", "message": question, "message_id": str(question_id)}
                )
            )
            return await fragments_until_idle(socket)
        finally:
            await socket.disconnect()

    return async_to_sync(frames)()


def assert_withheld_everywhere(user, conversation_id, message, secret=SECRET, **kwargs) -> None:
    bodies = surfaces(user, conversation_id, message, searched=kwargs.get("searched", secret))
    leaked = [name for name, body in bodies.items() if secret in body]
    assert leaked == [], f"{secret!r} reached {user.username} on {leaked}"
    assert bodies["feedback"].startswith("404 ")  # like a message that does not exist
    if message.role == Message.Role.ASSISTANT:
        assert f'data-withheld="{Withheld.ACCESS}"' in bodies["page"]
        api = {m["id"]: m for m in json.loads(bodies["api"])["messages"]}
        assert api[str(message.pk)]["withheld"] == "access"


def assert_readable(user, conversation_id, message, secret=SECRET, admin=True, **kwargs) -> None:
    """The control: the restricted text does reach a reader of it (so its absence elsewhere
    is the rule's doing). `admin`: in the admin too (never a personal file's text)."""
    bodies = surfaces(user, conversation_id, message, searched=kwargs.get("searched", secret))
    if admin:
        assert secret in bodies["admin list"] and secret in bodies["admin page"]
    if message.role == Message.Role.ASSISTANT:  # history search never matches a summary
        assert secret in bodies["history"]
        assert secret in bodies["page"] and secret in bodies["api"]


def check_matrix(people, conversation_id, message, *, question: str, question_id) -> None:
    """Staff and a reader removed from the group never receive the restricted text; the
    asker's replay after their removal carries none either. The group's readers and a
    superuser do receive it."""
    assert_readable(people["reader by group"], conversation_id, message)
    assert_readable(people["superuser"], conversation_id, message)
    replayed = message.status != Message.Status.ERROR  # a failed answer is answered again
    if replayed:
        before = replay_frames(people["asker"], conversation_id, question, question_id)
        assert SECRET in "".join(before)

    assert_withheld_everywhere(people["staff"], conversation_id, message)
    people["reader by group"].groups.remove(people["hr"])
    assert_withheld_everywhere(people["reader by group"], conversation_id, message)
    if replayed:
        people["asker"].groups.remove(people["hr"])
        after = replay_frames(people["asker"], conversation_id, question, question_id)
        assert not any(SECRET in frame for frame in after)


# --- The column ---------------------------------------------------------------------------------
def test_a_generative_answer_repeating_its_source_without_a_marker(people, llm):
    mode_set(ChatSettings.Mode.GENERATIVE)
    llm.script(Scripted(pieces=["Grade 7 analysts are on the Quetzal band, ", "41,000 pounds."]))
    conversation_id = uuid.uuid4()
    ask(people["asker"], QUESTION, conversation_id)
    answer = answer_to(QUESTION, conversation_id)
    assert (answer.status, answer.citations.count()) == (Message.Status.COMPLETE, 0)
    assert NOT_GROUNDED_NOTICE in answer.warning and SECRET in answer.content

    check_matrix(people, conversation_id, answer, question=QUESTION, question_id=answer.reply_to_id)


def test_an_extractive_answer_stopped_before_its_first_marker(people, settings):
    mode_set(ChatSettings.Mode.EXTRACTIVE)
    settings.CHAT_STREAM_DELAY_MS = 1  # paced: the answer goes out in pieces
    conversation_id, question_id = uuid.uuid4(), uuid.uuid4()

    async def stopped() -> str:
        stream = answer_stream(
            user=people["asker"],
            question=QUESTION,
            message_id=question_id,
            conversation_id=conversation_id,
        )
        async for event in stream:
            if event.type == "answer_delta" and SECRET in event.data["text"]:
                break
        await stream.aclose()  # what Stop and a disconnect do
        return ""

    async_to_sync(stopped)()
    answer = answer_to(QUESTION, conversation_id)
    assert (answer.status, answer.citations.count()) == (Message.Status.INTERRUPTED, 0)
    assert SECRET in answer.content and "[1]" not in answer.content

    check_matrix(people, conversation_id, answer, question=QUESTION, question_id=question_id)


def test_a_generative_answer_that_broke_off_before_its_marker(people, llm):
    mode_set(ChatSettings.Mode.GENERATIVE)
    llm.script(
        Scripted(pieces=["Grade 7 analysts are on the Quetzal band of", " 41,000 pounds [1]."],
                 drop_after=1)
    )  # fmt: skip
    conversation_id = uuid.uuid4()
    ask(people["asker"], QUESTION, conversation_id)
    answer = answer_to(QUESTION, conversation_id)
    assert (answer.status, answer.citations.count()) == (Message.Status.ERROR, 0)
    assert SECRET in answer.content

    check_matrix(people, conversation_id, answer, question=QUESTION, question_id=answer.reply_to_id)


def test_a_follow_up_whose_prompt_held_a_restricted_answer(people, llm):
    mode_set(ChatSettings.Mode.GENERATIVE)
    llm.script(
        Scripted(pieces=["Grade 7 analysts are on the Quetzal band [1]."]),
        Scripted(pieces=["Full-time employees receive 25 days [1]. ", "Pay: the Quetzal band."]),
    )
    conversation_id = uuid.uuid4()
    ask(people["asker"], QUESTION, conversation_id)
    ask(people["asker"], LEAVE_QUESTION, conversation_id)
    follow_up = answer_to(LEAVE_QUESTION, conversation_id)
    # The restricted text reached the follow-up through the earlier turn only, and it cites
    # the handbook alone.
    prompt = llm.completions()[1].messages
    sources = prompt[-1]["content"].split("<sources>", 1)[1].split("</sources>", 1)[0]
    assert SECRET not in sources and any(SECRET in m["content"] for m in prompt[:-1])
    assert [c.document_title for c in follow_up.citations.all()] == ["Staff handbook"]

    check_matrix(
        people,
        conversation_id,
        follow_up,
        question=LEAVE_QUESTION,
        question_id=follow_up.reply_to_id,
    )
    assert people["pay"].pk in documents_given(follow_up)


def test_a_summary_of_a_restricted_answer(people, llm):
    mode_set(ChatSettings.Mode.GENERATIVE, max_history_turns=2)
    llm.script(
        Scripted(pieces=["Grade 7 analysts are on the Quetzal band [1]."]),
        Scripted(pieces=["Full-time employees receive 25 days [1]."]),
        Scripted(pieces=["The meal allowance is 45 euros [1]."]),
        Scripted(pieces=[SUMMARY]),  # the fourth question first folds the first turn
        Scripted(pieces=["Passwords need 14 characters [1]."]),
    )
    conversation_id = uuid.uuid4()
    for question in (QUESTION, LEAVE_QUESTION, MEAL_QUESTION, PASSWORD_QUESTION):
        ask(people["asker"], question, conversation_id)
    summary = Message.objects.get(conversation_id=conversation_id, role=Message.Role.SYSTEM_SUMMARY)
    assert summary.content == SUMMARY

    # History search does not match summaries (not part of the conversation as shown), and
    # the admin lists one only to who may read every document it draws on.
    assert_readable(people["superuser"], conversation_id, summary, searched="recapitulated")
    assert_withheld_everywhere(people["staff"], conversation_id, summary, searched="recapitulated")
    people["reader by group"].groups.remove(people["hr"])
    assert_withheld_everywhere(
        people["reader by group"], conversation_id, summary, searched="recapitulated"
    )
    # The answer given the summary draws on what it summarised.
    last = answer_to(PASSWORD_QUESTION, conversation_id)
    assert_withheld_everywhere(people["staff"], conversation_id, last)
    assert people["pay"].pk in documents_given(summary)


def test_an_answer_given_the_askers_personal_file_is_withheld_from_a_superuser(people, llm):
    mode_set(ChatSettings.Mode.GENERATIVE)
    conversation = Conversation.objects.create(
        owner=people["asker"], is_private=False, title=FILE_QUESTION
    )
    personal_file_create(
        people["asker"], title="offer.pdf", texts=[FILE_CHUNK], conversation=conversation
    )
    llm.script(Scripted(pieces=["Your letter gives a Zanzibarine bonus of 7,250 pounds."]))
    ask(people["asker"], FILE_QUESTION, conversation.pk)
    answer = answer_to(FILE_QUESTION, conversation.pk)
    assert answer.citations.count() == 0 and FILE_SECRET in answer.content

    assert_readable(people["asker"], conversation.pk, answer, secret=FILE_SECRET, admin=False)
    for role in ("superuser", "reader by group", "staff"):
        assert_withheld_everywhere(people[role], conversation.pk, answer, secret=FILE_SECRET)
