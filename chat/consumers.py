"""The conversation's WebSocket: questions in, the answering pipeline's events out as HTML.

One socket per open conversation (`/ws/chat/<conversation id>/`). The page's composer sends
JSON (`{"action": "send", "message", "message_id", "top_k", "document_ids", "is_private"}`,
or `stop`, `regenerate`, `retry`; or `files` with `file_ids`: the personal files the page
waits for, each sent as its chip once read,
docs/decisions/0082-personal-file-progress-over-the-socket.md); the consumer answers with HTML
fragments the htmx WebSocket extension swaps in out of band: the question's bubble, the
answer's bubble with a typing indicator, each piece of the answer (escaped) appended to it (the
sidebar's list with the conversation moved to the top of its group right after the first; for
the socket's later questions, only the conversation's item moved up), the sources, then the
answer rendered whole from the database (the very partial a reload uses).

Generation runs in its own task, so Stop and a disconnect can cancel it; the pipeline then
stores the part already streamed as `interrupted`. An answer runs in the process that holds
the socket it was asked on, so a Stop on that socket always reaches it. A Stop on another
socket of the conversation's owner (a second tab, possibly served by another process) is
routed to it: the conversation's in-flight lock names the channel of the socket running the
answer, and the channel layer delivers `chat.stop` there
(docs/decisions/0042-the-in-flight-lock-table.md). Nobody else can stop an answer: a reader's
Stop only resets their own page.

Each socket does its database work on a thread of its own, as Django gives each HTTP request
one (docs/decisions/0045-a-thread-per-socket.md). Why HTML fragments rather than events:
docs/decisions/0044-html-fragments-over-the-socket.md.

This module holds the socket itself; the composer's JSON is read in chat/socket_request.py and
what the socket renders from the database in chat/socket_render.py.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import ThreadSensitiveContext
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.db import DatabaseError
from django.urls import reverse

from accounts.sessions import Standing, session_standing
from chat import fragments
from chat.answering.pipeline import AnswerOptions, answer_stream
from chat.errors import AnswerError
from chat.models import Message
from chat.presenters import MessageView
from chat.ratelimit import (
    InFlightLock,
    chat_admit,
    in_flight_holder,
    in_flight_release,
    in_flight_renew,
    throttled_message,
)
from chat.selectors import (
    ConversationAccess,
    conversation_access_by_id,
    exchange_stored,
)
from chat.socket_limits import CLOSE_TOO_MANY_SOCKETS, socket_admit, socket_release
from chat.socket_render import (
    conversation_fragments,
    conversation_moved_html,
    final_html,
    finished_html,
    sources_html,
)
from chat.socket_request import Admission, Exchange, request_from
from knowledge.access import Reader, reader_for, user_is_staff
from knowledge.personal_progress import (
    personal_file_changes,
    personal_files_followable,
    personal_files_settled,
)

logger = logging.getLogger(__name__)
R = TypeVar("R")

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
# One question in flight per conversation, across tabs and processes: the socket answering
# renews the lock every IN_FLIGHT_RENEW_SECONDS; it lapses IN_FLIGHT_SECONDS after its holder
# died (docs/decisions/0042-the-in-flight-lock-table.md,
# docs/decisions/0106-stuck-states-and-stop-frames.md).
IN_FLIGHT_SECONDS = 45
IN_FLIGHT_RENEW_SECONDS = 10
# A socket looks up who runs its conversation's answer (a Stop for another tab) at most once in
# this many seconds: further Stop frames meanwhile cost no query
# (docs/decisions/0106-stuck-states-and-stop-frames.md).
STOP_LOOKUP_SECONDS = 1.0
# A socket following files being read looks at them all again after this many seconds without
# an announcement, and retries listening this long after the database failed.
FILES_RECHECK_SECONDS = 30.0
FILES_RETRY_SECONDS = 2.0
FAILED_MESSAGE = "Something went wrong while answering. Please try again."
# The messages that ask a question (the composer's `action`).
ANSWER_ACTIONS = frozenset({"send", "regenerate", "retry"})


class ChatConsumer(AsyncWebsocketConsumer):
    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        # Every thread-sensitive call of this socket (Channels' connection clean-up before each
        # message, the checks, the answers) runs on this socket's own thread.
        async with ThreadSensitiveContext():
            await super().__call__(scope, receive, send)

    async def dispatch(self, message: dict) -> None:
        """As Channels dispatches, less its hop to the socket's thread before each message
        from the browser to close the thread's outdated database connections: every database
        call of this consumer goes through `database_sync_to_async`, which does that before
        and after the call (channels.db), and the message's first one, the session's check,
        follows at once."""
        if message.get("type") == "websocket.receive":
            await self.websocket_receive(message)
            return
        await super().dispatch(message)

    async def connect(self) -> None:
        self.user = self.scope.get("user")
        self.conversation_id = str(self.scope["url_route"]["kwargs"]["conversation_id"])
        self.task: asyncio.Task | None = None
        self.exchange: Exchange | None = None
        self.access: str | None = None
        self.stop_looked_up = -STOP_LOOKUP_SECONDS  # monotonic time of the last holder lookup
        self.followed: set[int] = set()  # the owner's files being read, whose end is sent
        self.following: asyncio.Task | None = None
        self.listening = asyncio.Event()
        self.states: dict[tuple[bool, bool], str] = {}  # see _state_html
        self.sidebar_listed = False  # the socket sent the sidebar's list (`_listing_html`)
        self.lock_released = True  # the lock of the socket's last answer (`_released_after`)
        # Accept first, then close with a code: the browser sees why and does not reconnect.
        await self.accept()
        if self.user is None or not self.user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not user_is_staff(self.user):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        if not socket_admit(self.user.pk):
            await self.close(code=CLOSE_TOO_MANY_SOCKETS)
            return
        self.admitted = True
        self.access = await database_sync_to_async(self._access)()
        if self.access is None:
            await self.close(code=CLOSE_FORBIDDEN)

    def _access(self) -> str | None:
        """owner: may post; reader: someone else's shared conversation; new: not created yet
        (the first question creates it for this user); None: someone else's private one."""
        access = conversation_access_by_id(self.user, self.conversation_id)
        if access is None:
            return "new"
        if access == ConversationAccess.OWNER:
            return "owner"
        return "reader" if access == ConversationAccess.READ else None

    async def disconnect(self, code: int) -> None:
        if getattr(self, "admitted", False):
            self.admitted = False
            socket_release(self.user.pk)
        await self._cancel()
        if self.following is not None:
            self.following.cancel()
            await asyncio.gather(self.following, return_exceptions=True)

    # --- Client messages ------------------------------------------------------------------
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.access is None:  # refused in connect() or on a message: the socket is closing
            return
        try:
            payload = json.loads(text_data or "")
        except ValueError:
            payload = None
        action = self._answerable(payload)
        if action is not None:
            # The session is checked first thing on the admission's thread hop (`_admit`).
            self._answer_start(payload, action, session_checked=False)
            return
        # Anything else is checked on a hop of its own first, which the socket's thread runs
        # after the hops already queued (a question sent as the last answer's lock is being
        # released finds that answer done).
        if not await self._still_signed_in():
            return
        if not isinstance(payload, dict):
            await self.send(fragments.notice_html("That request could not be read."))
            return
        action = payload.get("action", "send")
        if action == "stop":
            await self._stop()
            return
        if action == "files":
            await self._follow(payload.get("file_ids"))
            return
        if not isinstance(action, str) or action not in ANSWER_ACTIONS:
            await self.send(fragments.notice_html(f"Unknown action: {str(action)[:40]}."))
            return
        if self.task is not None and not self.task.done():
            await self.send(
                fragments.notice_html(
                    "Please wait for the current answer to finish (or stop it) first.",
                    level="info",
                )
            )
            return
        if self.access == "reader":
            await self._refuse(
                "This conversation belongs to someone else: you can read it, but only its "
                "owner can ask questions in it."
            )
            return
        self._answer_start(payload, action, session_checked=True)

    def _answer_start(self, payload: dict, action: str, *, session_checked: bool) -> None:
        """Answer the question of `payload` in a task of its own (`self.task`)."""
        try:
            request: dict[str, Any] | AnswerError = request_from(payload, action)
        except AnswerError as error:
            request = error  # refused in the task, after the rate limit counted it
        self.task = asyncio.create_task(self._answer(request, session_checked=session_checked))

    def _answerable(self, payload: object) -> str | None:
        """The action of a message that asks a question this socket takes (no answer running,
        the asker's own conversation), else None. Such a message is answered after the
        session's check on the admission's hop; any other is checked on a hop of its own
        first."""
        if not isinstance(payload, dict):
            return None
        action = payload.get("action", "send")
        if not isinstance(action, str) or action not in ANSWER_ACTIONS:
            return None
        if (self.task is not None and not self.task.done()) or self.access == "reader":
            return None
        return action

    def _standing(self) -> str:
        """The session's `Standing`, read again for each message (`session_standing`)."""
        key = getattr(self.scope.get("session"), "session_key", None)
        return session_standing(session_key=key, user_id=self.user.pk)

    async def _still_signed_in(self) -> bool:
        """Whether the session still signs the user in, read again for each message; if not,
        the answer is stopped and the socket closed, 4401 or 4403 (no longer staff)
        (docs/decisions/0140-sign-in-age-for-sessions-tokens-and-sockets.md)."""
        standing = await database_sync_to_async(self._standing)()
        if standing == Standing.SIGNED_IN:
            return True
        await self._cancel()
        await self._signed_out(standing)
        return False

    async def _signed_out(self, standing: str) -> None:
        """Close the socket of a session that no longer signs its user in: 4401, or 4403 when
        they are no longer staff."""
        self.access = None
        forbidden = standing == Standing.FORBIDDEN
        await self.close(code=CLOSE_FORBIDDEN if forbidden else CLOSE_UNAUTHENTICATED)

    async def _refuse(self, text: str) -> None:
        await self.send(fragments.notice_html(text) + await self._state_html(busy=False))

    # --- One answer -----------------------------------------------------------------------
    async def _answer(
        self, request: dict[str, Any] | AnswerError, *, session_checked: bool = False
    ) -> None:
        """Admit the request (rate limit, then the conversation's in-flight lock, then what is
        stored under its message id, on one thread hop), then answer it. See
        docs/decisions/0041-one-statement-admission.md. Whatever fails (the database going
        away while admitting, answering or rendering the end), the page is told and its
        composer freed (docs/decisions/0106-stuck-states-and-stop-frames.md)."""
        try:
            await self._answer_admitted(request, session_checked=session_checked)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("Answering over the WebSocket failed")
            self.exchange = None
            await self._send_failure()

    async def _send_failure(self) -> None:
        """The failure notice (with a retry button) and the composer freed."""
        await self.send(
            fragments.notice_html(FAILED_MESSAGE, level="error", retry=True)
            + await self._state_html(busy=False)
        )

    async def _answer_admitted(
        self, request: dict[str, Any] | AnswerError, *, session_checked: bool
    ) -> None:
        message_id = None if isinstance(request, AnswerError) else request["message_id"]
        admission = await database_sync_to_async(self._admit)(
            message_id, session_checked=session_checked
        )
        if admission.signed_in != Standing.SIGNED_IN:
            await self._signed_out(admission.signed_in)
            return
        if admission.throttled is not None:
            await self._refuse(
                f"{throttled_message(admission.throttled)} "
                "(↑ in the empty composer brings your question back.)"
            )
            return
        if isinstance(request, AnswerError):
            await self._refuse(request.message)
            return
        if not admission.locked:
            await self._refuse(
                "Another question in this conversation is still being answered "
                "(in another tab?). Please wait for it to finish."
            )
            return
        self.lock_released = False
        renewing = asyncio.ensure_future(self._renew())
        try:
            await self._answer_locked(**request, stored=admission.stored, reader=admission.reader)
        finally:
            renewing.cancel()
            if not self.lock_released:
                await self._release()

    async def _renew(self) -> None:
        """Renew the conversation's lock every IN_FLIGHT_RENEW_SECONDS until cancelled (the
        answer ended); a database that cannot be reached is tried again at the next turn."""
        while True:
            await asyncio.sleep(IN_FLIGHT_RENEW_SECONDS)
            try:
                await database_sync_to_async(in_flight_renew)(self._lock)
            except DatabaseError:
                logger.warning("The in-flight lock of a conversation could not be renewed")

    async def _release(self) -> None:
        """Release the conversation's lock; a database that cannot be reached lets it lapse
        (IN_FLIGHT_SECONDS) instead of failing the answer already shown."""
        try:
            await database_sync_to_async(in_flight_release)(self._lock)
        except DatabaseError:
            logger.warning("The in-flight lock of a conversation could not be released")

    def _released_after(self, render: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        """`render(*args, **kwargs)`, then the conversation's lock released on the same thread
        hop: for what comes once the answer is stored (its sources, a refusal's sidebar).
        `lock_released` is then set; a database that cannot be reached leaves the release to
        the end of the answer."""
        rendered = render(*args, **kwargs)
        try:
            in_flight_release(self._lock)
        except DatabaseError:
            logger.warning("The in-flight lock of a conversation could not be released")
        else:
            self.lock_released = True
        return rendered

    def _admit(self, message_id: str | None, *, session_checked: bool) -> Admission:
        """Check the session unless `session_checked` (`_standing`: nothing more when it no
        longer signs the user in); count the request against the rate limit; unless it is
        refused (or malformed: `message_id` None), take the conversation's in-flight lock, read
        the stored question with this id and its answer, and compute the asker's `Reader` for
        this message (the pipeline, the withheld checks and the final render use it)."""
        standing = Standing.SIGNED_IN if session_checked else self._standing()
        if standing != Standing.SIGNED_IN:
            return Admission(signed_in=standing)
        admitted = chat_admit(self.user, lock=None if message_id is None else self._lock)
        if admitted.throttled is not None or not admitted.locked:
            return Admission(throttled=admitted.throttled)
        stored = exchange_stored(conversation_id=self.conversation_id, question_id=message_id)
        return Admission(locked=True, stored=stored, reader=reader_for(self.user))

    async def _answer_locked(
        self,
        *,
        action: str,
        question: object,
        message_id: str,
        options: AnswerOptions,
        is_private: bool,
        stored: tuple[Message | None, Message | None],
        reader: Reader | None,
    ) -> None:
        stored_question, previous = stored
        if action == "regenerate" and stored_question is None:
            await self._refuse("There is no such question in this conversation to answer again.")
            return
        # A retry: the question may never have reached us (send it), or its answer was cut
        # off (answer it again); a complete answer is simply shown again.
        if (
            action == "retry"
            and previous is not None
            and previous.status == Message.Status.INTERRUPTED
        ):
            action = "regenerate"
        if action == "regenerate":
            options = AnswerOptions(
                top_k=options.top_k, document_ids=options.document_ids, regenerate=True
            )
        typed = question if isinstance(question, str) else ""  # checked by the core
        self.exchange = Exchange(
            question_id=message_id,
            question=stored_question.content if stored_question else typed,
            replace_target=f"#msg-{previous.pk}" if previous is not None else "",
            reader=reader,
        )
        opening = await self._state_html(busy=True)
        if stored_question is None and typed:
            bubble = MessageView(id=message_id, role=Message.Role.USER, content=typed)
            opening = fragments.append_to_messages(fragments.message_html(bubble)) + opening
        await self.send(opening)

        try:
            async for event in answer_stream(
                user=self.user,
                question=question,
                message_id=message_id,
                conversation_id=self.conversation_id,
                is_private=is_private,
                options=options,
                reader=reader,
                conversation_empty=self.access == "new",
            ):
                if event.row is not None:
                    self.exchange.finished = event.row
                await self._render_event(event.type, event.data)
        except AnswerError as error:
            html = fragments.notice_html(error.message)
            if stored_question is None and not self.exchange.answer_id:
                html = f'<div id="msg-{message_id}" hx-swap-oob="delete"></div>' + html
            await self.send(html + await self._state_html(busy=False))
            self.exchange = None
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("Answering over the WebSocket failed")
            self.exchange = None
            await self._send_failure()
            return
        await self._send_final()

    async def _render_event(self, kind: str, data: dict[str, Any]) -> None:
        exchange = self.exchange
        if kind == "warning":
            exchange.warning = str(data.get("message", ""))
            if exchange.answer_id:
                await self.send(fragments.warning_html(exchange.answer_id, exchange.warning))
        elif kind == "answer_start":
            exchange.answer_id = exchange.final_id = str(data["message_id"])
            html = fragments.answer_start_html(
                data,
                question=exchange.question,
                question_id=exchange.question_id,
                warning=exchange.warning,
                replace_target=exchange.replace_target,
            )
            await self.send(html)
        elif kind == "answer_delta" and exchange.answer_id:
            piece = str(data.get("text", ""))
            exchange.deltas += 1
            exchange.streamed += piece
            await self.send(fragments.delta_html(exchange.answer_id, piece))
            # The sidebar after the answer's first words, not before: its query and its
            # rendering are no part of the wait for an answer. With the second piece, so that
            # an answer written whole (one piece, its sources right after) has it on its
            # sources' thread hop.
            if exchange.deltas > 1:
                await self._send_listing()
        elif kind == "sources" and exchange.answer_id:
            exchange.sent_citations = tuple(
                (c.get("n"), c.get("chunk_id")) for c in data.get("citations") or []
            )
            listing = self._listing_render()
            html, exchange.documents, listed = await database_sync_to_async(self._released_after)(
                self._sources_and_listing, exchange.answer_id, data, listing
            )
            self._listed(listed)
            await self.send(html + listed)
        elif kind == "answer_end":
            exchange.ended = True
        elif kind == "refusal":
            exchange.final_id = str(data.get("message_id") or "")
            await self._send_listing(release=True)  # the refusal is stored
        # answer_end, refusal and error end the stream: the final render follows.

    async def _send_listing(self, *, release: bool = False) -> None:
        html = await self._listing_html(release=release)
        if html:
            await self.send(html)

    async def _listing_html(self, *, release: bool = False) -> str:
        """Once per exchange, when its question is stored: the sidebar with the conversation
        at the top of its group, highlighted; and when the question created the conversation,
        its header too (the state that follows gives the page its new URL). After the socket's
        first such list, only the conversation's item is moved up: a list that grows with the
        conversations is not rendered again for every question. `release`: the answer is
        stored, its lock released on the same hop (`_released_after`)."""
        listing = self._listing_render()
        if listing is None:
            return ""
        if release:
            html = await database_sync_to_async(self._released_after)(listing)
        else:
            html = await database_sync_to_async(listing)()
        self._listed(html)
        return html

    def _listing_render(self) -> Callable[[], str] | None:
        """The render of `_listing_html` (to run on a thread hop), or None when the exchange
        has nothing to list (none running, or listed already)."""
        exchange = self.exchange
        if exchange is None or exchange.listed:
            return None
        if self.sidebar_listed and self.access != "new":
            return functools.partial(conversation_moved_html, self.user, self.conversation_id)
        return functools.partial(
            conversation_fragments, self.user, self.conversation_id, new=self.access == "new"
        )

    def _listed(self, html: str) -> None:
        """Note that the sidebar `html` (when not empty) is on its way to the page."""
        if html and self.exchange is not None:
            self.exchange.listed = self.sidebar_listed = True
            if self.access == "new":
                self.access = "owner"

    @staticmethod
    def _sources_and_listing(
        answer_id: str, data: dict[str, Any], listing: Callable[[], str] | None
    ) -> tuple[str, dict[int, bool], str]:
        """The fragments of the sources event `data` below the answer `answer_id` and the cited
        documents' state (`sources_html`), and the sidebar when `listing` renders it
        (`_listing_render`)."""
        html, documents = sources_html(
            answer_id,
            data.get("citations") or [],
            str(data.get("evidence") or ""),
            data.get("searched_document"),
            data.get("searched_documents") or [],
        )
        return html, documents, listing() if listing is not None else ""

    async def _send_final(self) -> None:
        """The answer rendered whole from the database, in place of what streamed; when that
        fails (the database went away), the failure notice instead. Either way the composer
        is freed."""
        exchange = self.exchange
        if exchange is None:
            return
        try:
            # An answer just streamed whole is rendered from its row as stored: nothing to read.
            html = finished_html(exchange)
            if html is None:
                html = await database_sync_to_async(final_html)(
                    exchange, user=self.user, conversation_id=self.conversation_id
                )
            html += await self._listing_html()  # stopped or refused before any answer started
        except Exception:
            logger.exception("Rendering the end of an answer failed")
            self.exchange = None
            await self._send_failure()
            return
        self.exchange = None
        await self.send(html + await self._state_html(busy=False))

    async def _state_html(self, *, busy: bool) -> str:
        """The stream state fragment; each of its few forms (busy or not, with the
        conversation's URL once it exists) rendered once per socket: it depends on nothing else."""
        listed = self.access in {"owner", "reader"}
        key = (busy, listed)
        html = self.states.get(key)
        if html is None:
            url = ""
            if listed:
                url = reverse("chat:conversation", kwargs={"conversation_id": self.conversation_id})
            html = self.states[key] = fragments.state_html(
                busy=busy, conversation_id=self.conversation_id, conversation_url=url
            )
        return html

    # --- Stop / disconnect ----------------------------------------------------------------
    async def _cancel(self) -> bool:
        """Cancel the running answer and wait until the pipeline has stored its part."""
        task = self.task
        if task is None or task.done():
            return False
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return True

    @property
    def _lock(self) -> InFlightLock:
        """The conversation's in-flight lock: held while one of its questions is answered by
        the socket whose channel name it holds."""
        return InFlightLock(
            key=f"conversation:{self.conversation_id}",
            holder=self.channel_name,
            seconds=IN_FLIGHT_SECONDS,
        )

    async def _stop(self) -> None:
        if await self._stop_here():
            return
        if self.access == "owner":
            await self._stop_elsewhere()
        await self.send(await self._state_html(busy=False))

    async def _stop_here(self) -> bool:
        """Stop the answer this socket is running, if any, and show what it kept."""
        exchange = self.exchange
        if await self._cancel() and exchange is not None:
            self.exchange = exchange
            await self._send_final()
            return True
        return False

    async def _stop_elsewhere(self) -> None:
        """Send Stop to the socket running this conversation's answer, in this process or
        another (the lock names its channel; the channel layer carries the message)."""
        if self.channel_layer is None:
            return
        now = time.monotonic()
        if now - self.stop_looked_up < STOP_LOOKUP_SECONDS:
            return  # a Stop was just routed: frames in a burst cost no query
        self.stop_looked_up = now
        try:
            holder = await database_sync_to_async(in_flight_holder)(self._lock.key)
        except DatabaseError:
            logger.warning("Routing a Stop failed: the in-flight lock could not be read")
            return
        if holder and holder != self.channel_name:
            await self.channel_layer.send(holder, {"type": "chat.stop"})

    # --- Personal files being read -----------------------------------------------------------
    async def _follow(self, file_ids: object) -> None:
        """Follow the page's files being read (`{"action": "files", "file_ids": [...]}`): each
        of them that is this user's own (the one read rule) is sent as its chip once its
        reading ends (ready, failed, expired), as the worker announces it
        (knowledge/personal_progress.py); anything else is ignored, silently."""
        if not isinstance(file_ids, list):
            return
        ids = {v for v in file_ids if isinstance(v, int) and not isinstance(v, bool) and v > 0}
        followable = await database_sync_to_async(personal_files_followable)(
            user=self.user, file_ids=ids
        )
        new = set(followable) - self.followed
        if not new:
            return
        self.followed |= new
        if self.following is None or self.following.done():
            self.listening.clear()
            self.following = asyncio.create_task(self._follow_files())
        elif self.listening.is_set():  # else the listener reads them once it listens
            await self._send_settled(new)

    async def _follow_files(self) -> None:
        """Listen for the followed files' changes until none is left to follow; a database
        that cannot be reached is tried again (FILES_RETRY_SECONDS) while some are."""
        while self.followed:
            try:
                async with personal_file_changes() as changes:
                    self.listening.set()
                    await self._send_settled(set(self.followed))
                    while self.followed:
                        changed = await changes.next(timeout=FILES_RECHECK_SECONDS)
                        # Nothing announced for a while: look at them all again.
                        ids = (changed & self.followed) if changed else set(self.followed)
                        if ids:
                            await self._send_settled(ids)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("Following personal files failed; trying again", exc_info=True)
                self.listening.clear()
                await asyncio.sleep(FILES_RETRY_SECONDS)
        self.listening.clear()

    async def _send_settled(self, file_ids: set[int]) -> None:
        settled = await database_sync_to_async(personal_files_settled)(
            user=self.user, file_ids=file_ids
        )
        settled = [d for d in settled if d.pk in self.followed]
        if not settled:
            return
        self.followed -= {d.pk for d in settled}
        await self.send("".join(fragments.file_chip_html(d) for d in settled))

    async def chat_stop(self, event: dict[str, Any]) -> None:
        """A Stop routed from another socket of the owner (`_stop_elsewhere`): the running
        answer stops, and this socket's page shows what was kept, as after its own Stop."""
        await self._stop_here()
