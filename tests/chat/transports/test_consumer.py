"""The conversation WebSocket: access rules, the fragments of a streamed answer, Stop,
regenerate, the rate limit and escaping — over a real socket, real database, real model."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.test import Client

from chat import fragments as fragments_module
from chat.models import Conversation, Message
from chat.presenters import message_views
from chat.transcript import answer_row_read
from tests.support.clients import fragments_until_idle, send_payload, socket_for
from tests.support.knowledge_base import LEAVE_TEXTS, document_create

pytestmark = pytest.mark.django_db(transaction=True)

LEAVE_QUESTION = "How many days of paid annual leave do full-time employees receive?"
UNRELATED_QUESTION = "What is the boiling point of liquid nitrogen on Neptune's moons?"


@pytest.fixture
def leave_kb(db):
    return document_create(
        title="Staff handbook",
        texts=LEAVE_TEXTS,
        pages=[3, 4],
        sections=["Leave > Annual leave", "Leave > Carry-over"],
    )


def index_of(fragments: list[str], needle: str) -> int:
    return next(i for i, fragment in enumerate(fragments) if needle in fragment)


async def closed_with(communicator) -> int:
    output = await communicator.receive_output(timeout=5)
    assert output["type"] == "websocket.close"
    return output["code"]


# --- Access --------------------------------------------------------------------------------------
async def test_anonymous_socket_is_closed_as_unauthenticated():
    communicator = await socket_for(AnonymousUser(), uuid.uuid4())
    assert await closed_with(communicator) == 4401
    await communicator.disconnect()


async def test_non_staff_socket_is_closed_as_forbidden(django_user_model):
    user = await django_user_model.objects.acreate(username="visitor", is_staff=False)
    communicator = await socket_for(user, uuid.uuid4())
    assert await closed_with(communicator) == 4403
    await communicator.disconnect()


async def test_private_conversation_of_another_user_is_refused(staff_user, other_staff_user):
    private = await Conversation.objects.acreate(
        owner=other_staff_user, is_private=True, title="Salary questions"
    )
    communicator = await socket_for(staff_user, private.pk)
    assert await closed_with(communicator) == 4403
    await communicator.disconnect()


async def test_shared_conversation_of_another_user_is_read_only(staff_user, other_staff_user):
    shared = await Conversation.objects.acreate(owner=other_staff_user, title="Leave")
    communicator = await socket_for(staff_user, shared.pk)
    await communicator.send_to(text_data=send_payload("Can I post here?"))
    fragments = await fragments_until_idle(communicator)
    await communicator.disconnect()
    assert "only its owner can ask questions" in "".join(fragments)
    assert not await Message.objects.filter(conversation=shared).aexists()


async def test_browser_socket_needs_an_allowed_origin_and_a_session(staff_user):
    from config.asgi import application

    client = Client()
    await sync_to_async(client.force_login)(staff_user)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    path = f"/ws/chat/{uuid.uuid4()}/"

    foreign = WebsocketCommunicator(
        application, path, headers=[(b"origin", b"https://evil.example"), (b"cookie", cookie)]
    )
    connected, _ = await foreign.connect()
    assert not connected
    await foreign.disconnect()

    anonymous = WebsocketCommunicator(
        application, path, headers=[(b"origin", b"http://testserver")]
    )
    connected, _ = await anonymous.connect()
    assert connected
    assert await closed_with(anonymous) == 4401
    await anonymous.disconnect()

    signed_in = WebsocketCommunicator(
        application, path, headers=[(b"origin", b"http://testserver"), (b"cookie", cookie)]
    )
    connected, _ = await signed_in.connect()
    assert connected
    assert await signed_in.receive_nothing(timeout=0.3)
    await signed_in.disconnect()


# --- Streaming -----------------------------------------------------------------------------------
async def test_answer_streams_as_the_fragment_sequence(staff_user, leave_kb, settings):
    settings.CHAT_STREAM_DELAY_MS = 1  # paced: the answer in pieces (unpaced, it is one)
    conversation_id = uuid.uuid4()
    communicator = await socket_for(staff_user, conversation_id)
    await communicator.send_to(text_data=send_payload(LEAVE_QUESTION))
    fragments = await fragments_until_idle(communicator)
    await communicator.disconnect()

    answer = await Message.objects.aget(conversation_id=conversation_id, role="assistant")
    answer_id = str(answer.pk)
    # 1. the question's bubble, appended, and the conversation marked busy
    assert 'hx-swap-oob="beforeend:#messages"' in fragments[0]
    assert 'data-role="user"' in fragments[0] and LEAVE_QUESTION in fragments[0]
    assert 'data-busy="true"' in fragments[0]
    # 2. the answer's bubble with its typing indicator
    start = index_of(fragments, f'id="msg-{answer_id}"')
    assert 'data-status="streaming"' in fragments[start]
    assert "loading-dots" in fragments[start]
    # 3. the answer in several escaped pieces appended to its body
    deltas = [f for f in fragments if f'hx-swap-oob="beforeend:#msg-{answer_id}-body"' in f]
    assert len(deltas) >= 2
    assert start < index_of(fragments, deltas[0])
    streamed = "".join(re.sub(r"^<div[^>]*>|</div>$", "", delta) for delta in deltas)
    assert streamed == answer.content
    # 4. the sources, then the whole answer from the database, replacing the bubble
    sources = index_of(fragments, f'id="msg-{answer_id}-sources" hx-swap-oob="true"')
    assert "Staff handbook" in fragments[sources]
    final = index_of(
        fragments,
        f'id="msg-{answer_id}" class="chat chat-start" data-role="assistant" '
        'data-status="complete"',
    )
    assert index_of(fragments, deltas[-1]) < sources < final
    assert fragments[final].strip().startswith(f'<div id="msg-{answer_id}"')
    assert 'hx-swap-oob="true"' in fragments[final].split(">", 1)[0]
    assert "cite-badge" in fragments[final] and "Grounded in" in fragments[final]
    # 5. the new conversation appears in the sidebar and the page gets its URL
    everything = "".join(fragments)
    assert 'id="conversation-list" hx-swap-oob="true"' in everything
    assert f'data-conversation-url="/c/{conversation_id}/"' in fragments[-1]


async def test_a_conversation_that_gets_a_question_moves_to_the_top_of_the_sidebar(
    staff_user, leave_kb
):
    asked = await Conversation.objects.acreate(owner=staff_user, title="Leave, asked again")
    await Conversation.objects.acreate(owner=staff_user, title="A newer chat")
    await Conversation.objects.acreate(owner=staff_user, is_private=True, title="A private chat")
    communicator = await socket_for(staff_user, asked.pk)
    await communicator.send_to(text_data=send_payload(LEAVE_QUESTION))
    fragments = await fragments_until_idle(communicator)
    # The socket's next question moves just its item up: the list is not rendered again.
    await communicator.send_to(text_data=send_payload("And how many days can be carried over?"))
    later = await fragments_until_idle(communicator)
    await communicator.disconnect()
    assert not [f for f in later if 'id="conversation-list"' in f]
    (moved,) = [f for f in later if f'id="sidebar-{asked.pk}"' in f]
    # (in the frame of the answer's sources): its old place deleted, then the item at the top
    deleted = moved.index(f'<li id="sidebar-{asked.pk}" hx-swap-oob="delete"></li>')
    assert deleted < moved.index('<ul hx-swap-oob="afterend:#group-shared">')
    assert "menu-active" in moved and "Leave, asked again" in moved

    lists = [f for f in fragments if 'id="conversation-list" hx-swap-oob="true"' in f]
    assert len(lists) == 1  # once per exchange
    shared, private = lists[0].split('id="group-private"')
    assert re.findall(r"data-sidebar-title>([^<]*)<", shared) == [
        "Leave, asked again",
        "A newer chat",
    ]
    assert re.findall(r"data-sidebar-title>([^<]*)<", private) == ["A private chat"]
    item = shared.split(f'id="sidebar-{asked.pk}"', 1)[1].split("</a>", 1)[0]
    assert "menu-active" in item and 'aria-current="page"' in item  # highlighted
    # After the answer's first words (no part of their wait): an answer written whole, one
    # piece, has it in the frame of its sources, rendered on their thread hop.
    answer = (
        await Message.objects.filter(conversation=asked, role="assistant")
        .order_by("created_at")
        .afirst()
    )
    listed = fragments.index(lists[0])
    assert index_of(fragments, f'id="msg-{answer.pk}"') < listed
    assert listed == index_of(fragments, f"beforeend:#msg-{answer.pk}-body") + 1
    assert listed == index_of(fragments, f'id="msg-{answer.pk}-sources" hx-swap-oob="true"')
    assert 'id="conversation-header"' not in lists[0]  # the page already has its header


async def test_an_answer_streamed_in_pieces_moves_its_conversation_up_with_its_second(
    staff_user, leave_kb, settings
):
    """An answer streamed in pieces (paced here; a language model's) has the sidebar sent
    right after its second piece, not at its end."""
    settings.CHAT_STREAM_DELAY_MS = 1
    asked = await Conversation.objects.acreate(owner=staff_user, title="Leave, asked again")
    communicator = await socket_for(staff_user, asked.pk)
    await communicator.send_to(text_data=send_payload(LEAVE_QUESTION))
    fragments = await fragments_until_idle(communicator)
    await communicator.disconnect()
    answer = await Message.objects.filter(conversation=asked, role="assistant").afirst()
    pieces = [i for i, f in enumerate(fragments) if f"beforeend:#msg-{answer.pk}-body" in f]
    lists = [i for i, f in enumerate(fragments) if 'id="conversation-list"' in f]
    assert len(pieces) > 2 and lists == [pieces[1] + 1]
    assert lists[0] < index_of(fragments, f'id="msg-{answer.pk}-sources" hx-swap-oob="true"')


async def test_the_final_render_of_a_streamed_answer_is_what_a_reload_renders(staff_user, leave_kb):
    """The answer just streamed whole to its asker is rendered at the end from its stored row
    without asking again whether it is withheld (chat/socket_render.py `_streamed_whole`):
    the very HTML the reader's own render of the row gives, rating included."""
    conversation = await Conversation.objects.acreate(owner=staff_user, title="Leave")
    communicator = await socket_for(staff_user, conversation.pk)
    await communicator.send_to(text_data=send_payload(LEAVE_QUESTION))
    fragments = await fragments_until_idle(communicator)
    await communicator.disconnect()

    answer = await Message.objects.aget(conversation=conversation, role="assistant")
    assert answer.status == Message.Status.COMPLETE and await answer.citations.acount() > 0

    def reload_render() -> str:
        row, _ = answer_row_read(answer.pk, conversation_id=conversation.pk)
        view = message_views([row], user=staff_user, can_post=True)[0]
        return fragments_module.message_html(view, oob="true")

    expected = await database_sync_to_async(reload_render)()
    assert fragments[-1].startswith(expected)


async def test_a_refused_question_moves_its_conversation_up_too(staff_user, leave_kb):
    asked = await Conversation.objects.acreate(owner=staff_user, title="Odd questions")
    await Conversation.objects.acreate(owner=staff_user, title="A newer chat")
    communicator = await socket_for(staff_user, asked.pk)
    await communicator.send_to(text_data=send_payload(UNRELATED_QUESTION))
    fragments = await fragments_until_idle(communicator)
    await communicator.disconnect()
    assert 'data-status="refused"' in "".join(fragments)
    lists = [f for f in fragments if 'id="conversation-list" hx-swap-oob="true"' in f]
    assert len(lists) == 1
    titles = re.findall(r"data-sidebar-title>([^<]*)<", lists[0])
    assert titles == ["Odd questions", "A newer chat"]


async def test_a_question_too_long_for_the_model_is_answered_with_a_visible_warning(
    staff_user, leave_kb
):
    question = LEAVE_QUESTION + " Please explain every detail of the rules." * 60
    conversation_id = uuid.uuid4()
    communicator = await socket_for(staff_user, conversation_id)
    await communicator.send_to(text_data=send_payload(question))
    fragments = await fragments_until_idle(communicator)
    await communicator.disconnect()
    answer = await Message.objects.aget(conversation_id=conversation_id, role="assistant")
    assert answer.warning
    final = next(f for f in fragments if 'data-status="complete"' in f)
    assert "alert-warning" in final and "longer than the search model can read" in final


async def test_refusal_is_rendered_with_its_suggestions(staff_user, leave_kb):
    communicator = await socket_for(staff_user, uuid.uuid4())
    await communicator.send_to(text_data=send_payload(UNRELATED_QUESTION))
    fragments = await fragments_until_idle(communicator)
    await communicator.disconnect()
    refusal = "".join(fragments)
    assert 'data-status="refused"' in refusal
    assert "I don&#x27;t have enough information" in refusal
    assert f'data-rephrase="{UNRELATED_QUESTION.replace(chr(39), "&#x27;")}"' in refusal


async def test_document_text_and_question_are_escaped_in_every_fragment(staff_user):
    await sync_to_async(document_create)(
        title="Badge <b>policy</b>",
        texts=[
            "Visitor badges are printed at reception <img src=x onerror=alert(1)> every "
            "morning. Lost visitor badges must be reported <script>alert(2)</script> to "
            "security at once."
        ],
    )
    communicator = await socket_for(staff_user, uuid.uuid4())
    question = "Where are visitor badges printed? <script>alert(3)</script>"
    await communicator.send_to(text_data=send_payload(question))
    fragments = await fragments_until_idle(communicator)
    await communicator.disconnect()
    everything = "".join(fragments)
    assert 'data-status="complete"' in everything
    assert "<script" not in everything
    assert "<img src=x" not in everything and "<b>policy" not in everything
    assert "&lt;script&gt;alert(3)&lt;/script&gt;" in everything  # the question
    assert "&lt;img src=x onerror=alert(1)&gt;" in everything  # the answer / sources
    assert "Badge &lt;b&gt;policy&lt;/b&gt;" in everything


async def test_stop_cancels_generation_and_keeps_the_partial_answer(staff_user, leave_kb, settings):
    settings.CHAT_STREAM_DELAY_MS = 400
    conversation_id = uuid.uuid4()
    communicator = await socket_for(staff_user, conversation_id)
    await communicator.send_to(text_data=send_payload(LEAVE_QUESTION))
    while '-body">' not in await communicator.receive_from(timeout=30):
        pass  # until the first piece of the answer
    await communicator.send_to(text_data=json.dumps({"action": "stop"}))
    fragments = await fragments_until_idle(communicator)
    await communicator.disconnect()

    answer = await Message.objects.aget(conversation_id=conversation_id, role="assistant")
    assert answer.status == Message.Status.INTERRUPTED
    assert answer.content  # the part already streamed is kept
    final = next(f for f in fragments if f'id="msg-{answer.pk}"' in f and "Stopped" in f)
    assert 'data-status="interrupted"' in final and "Stopped" in final
    # no piece arrives after the stop was acknowledged
    after_stop = fragments[fragments.index(final) :]
    assert not any(f'beforeend:#msg-{answer.pk}-body"' in f for f in after_stop)


async def test_disconnect_cancels_generation_and_stores_the_interruption(
    staff_user, leave_kb, settings
):
    settings.CHAT_STREAM_DELAY_MS = 400
    conversation_id = uuid.uuid4()
    communicator = await socket_for(staff_user, conversation_id)
    await communicator.send_to(text_data=send_payload(LEAVE_QUESTION))
    while '-body">' not in await communicator.receive_from(timeout=30):
        pass
    await communicator.disconnect()
    answer = await Message.objects.aget(conversation_id=conversation_id, role="assistant")
    assert answer.status == Message.Status.INTERRUPTED


async def test_one_question_at_a_time_per_conversation(staff_user, leave_kb, settings):
    settings.CHAT_STREAM_DELAY_MS = 200
    conversation_id = uuid.uuid4()
    communicator = await socket_for(staff_user, conversation_id)
    await communicator.send_to(text_data=send_payload(LEAVE_QUESTION))
    await communicator.receive_from(timeout=30)  # the question's bubble
    await communicator.send_to(text_data=send_payload("And part-time employees?"))
    fragments = await fragments_until_idle(communicator)
    await communicator.disconnect()
    assert "wait for the current answer" in "".join(fragments)
    assert await Message.objects.filter(conversation_id=conversation_id).acount() == 2


async def test_an_answer_is_not_held_up_by_database_work_elsewhere_in_the_process(
    staff_user, leave_kb
):
    """Channels runs every consumer's database calls on one process-wide thread unless told
    otherwise: while that thread is busy (here: blocked), a socket still connects and its
    question is answered."""
    release = threading.Event()
    blocker = asyncio.ensure_future(database_sync_to_async(release.wait)(60))
    try:
        conversation_id = uuid.uuid4()
        communicator = await socket_for(staff_user, conversation_id)
        await communicator.send_to(text_data=send_payload(LEAVE_QUESTION))
        fragments = await fragments_until_idle(communicator)
        await communicator.disconnect()
    finally:
        release.set()
        await blocker
    answer = await Message.objects.aget(conversation_id=conversation_id, role="assistant")
    assert answer.status == Message.Status.COMPLETE
    assert "25 days" in "".join(fragments)


async def test_regenerate_replaces_the_answer_in_place(staff_user, leave_kb):
    conversation_id = uuid.uuid4()
    communicator = await socket_for(staff_user, conversation_id)
    payload = send_payload(LEAVE_QUESTION)
    question_id = json.loads(payload)["message_id"]
    await communicator.send_to(text_data=payload)
    await fragments_until_idle(communicator)
    first = await Message.objects.aget(reply_to_id=question_id)

    await communicator.send_to(
        text_data=json.dumps({"action": "regenerate", "message_id": question_id})
    )
    fragments = await fragments_until_idle(communicator)
    await communicator.disconnect()
    second = await Message.objects.aget(reply_to_id=question_id)
    assert second.pk != first.pk
    assert not await Message.objects.filter(pk=first.pk).aexists()
    replaced = index_of(fragments, f'hx-swap-oob="outerHTML:#msg-{first.pk}"')
    assert f'id="msg-{second.pk}"' in fragments[replaced]
    assert not any('beforeend:#messages"' in f and 'data-role="user"' in f for f in fragments)


async def test_regenerate_only_answers_questions_of_this_conversation(staff_user, leave_kb):
    elsewhere = uuid.uuid4()
    communicator = await socket_for(staff_user, elsewhere)
    payload = send_payload(LEAVE_QUESTION)
    await communicator.send_to(text_data=payload)
    await fragments_until_idle(communicator)
    await communicator.disconnect()

    communicator = await socket_for(staff_user, uuid.uuid4())
    question_id = json.loads(payload)["message_id"]
    await communicator.send_to(
        text_data=json.dumps({"action": "regenerate", "message_id": question_id})
    )
    fragments = await fragments_until_idle(communicator)
    await communicator.disconnect()
    assert "no such question in this conversation" in "".join(fragments)
    answer = await Message.objects.aget(reply_to_id=question_id)
    assert answer.status == Message.Status.COMPLETE  # untouched


async def test_rate_limit_answers_with_a_friendly_message(staff_user, leave_kb, settings):
    settings.CHAT_RATE_LIMIT = "1/m"
    conversation_id = uuid.uuid4()
    communicator = await socket_for(staff_user, conversation_id)
    await communicator.send_to(text_data=send_payload(LEAVE_QUESTION))
    await fragments_until_idle(communicator)
    await communicator.send_to(text_data=send_payload("And how many can I carry over?"))
    fragments = await fragments_until_idle(communicator)
    await communicator.disconnect()
    notice = "".join(fragments)
    assert "faster than the limit allows" in notice and 'role="alert"' in notice
    assert await Message.objects.filter(conversation_id=conversation_id).acount() == 2


async def test_bad_requests_get_a_clear_message_and_no_answer(staff_user, leave_kb):
    conversation_id = uuid.uuid4()
    communicator = await socket_for(staff_user, conversation_id)
    await communicator.send_to(text_data="not json")
    assert "could not be read" in await communicator.receive_from(timeout=5)
    await communicator.send_to(text_data=json.dumps({"action": ["send"], "message": "x"}))
    assert "Unknown action" in await communicator.receive_from(timeout=5)  # not a crash
    await communicator.send_to(text_data=send_payload("   "))
    assert "The message is empty" in "".join(await fragments_until_idle(communicator))
    await communicator.send_to(text_data=send_payload(LEAVE_QUESTION, top_k=99))
    fragments = await fragments_until_idle(communicator)
    await communicator.disconnect()
    assert "top_k must be" in "".join(fragments)
    # the optimistic question bubble is taken back
    assert any('hx-swap-oob="delete"' in f for f in fragments)
    assert not await Message.objects.filter(conversation_id=conversation_id).aexists()


async def test_retry_after_a_lost_connection_answers_the_same_question_again(
    staff_user, leave_kb, settings
):
    settings.CHAT_STREAM_DELAY_MS = 400
    conversation_id = uuid.uuid4()
    payload = json.loads(send_payload(LEAVE_QUESTION))
    communicator = await socket_for(staff_user, conversation_id)
    await communicator.send_to(text_data=json.dumps(payload))
    while '-body">' not in await communicator.receive_from(timeout=30):
        pass
    await communicator.disconnect()  # the connection drops mid-answer
    interrupted = await Message.objects.aget(reply_to_id=payload["message_id"])
    assert interrupted.status == Message.Status.INTERRUPTED

    settings.CHAT_STREAM_DELAY_MS = 0
    communicator = await socket_for(staff_user, conversation_id)
    await communicator.send_to(text_data=json.dumps({**payload, "action": "retry"}))
    fragments = await fragments_until_idle(communicator)
    await communicator.disconnect()
    answer = await Message.objects.aget(reply_to_id=payload["message_id"])
    assert answer.status == Message.Status.COMPLETE
    assert any(f"outerHTML:#msg-{interrupted.pk}" in f for f in fragments)
    assert await Message.objects.filter(conversation_id=conversation_id).acount() == 2


async def test_stop_from_the_owners_other_tab_stops_the_answer_and_a_readers_does_not(
    staff_user, other_staff_user, leave_kb, settings
):
    settings.CHAT_STREAM_DELAY_MS = 300
    conversation_id = uuid.uuid4()
    running = await socket_for(staff_user, conversation_id)
    payload = send_payload(LEAVE_QUESTION)
    await running.send_to(text_data=payload)
    while '-body">' not in await running.receive_from(timeout=30):
        pass  # streaming; the conversation now exists
    reader = await socket_for(other_staff_user, conversation_id)
    await reader.send_to(text_data=json.dumps({"action": "stop"}))
    assert 'data-busy="false"' in await reader.receive_from(timeout=5)
    while '-body">' not in await running.receive_from(timeout=30):
        pass  # the reader's Stop stopped nothing
    other_tab = await socket_for(staff_user, conversation_id)
    await other_tab.send_to(text_data=json.dumps({"action": "stop"}))
    assert 'data-busy="false"' in await other_tab.receive_from(timeout=5)
    fragments = await fragments_until_idle(running)
    for communicator in (running, reader, other_tab):
        await communicator.disconnect()

    answer = await Message.objects.aget(reply_to_id=json.loads(payload)["message_id"])
    assert answer.status == Message.Status.INTERRUPTED
    assert any('data-status="interrupted"' in f and "Stopped" in f for f in fragments)
