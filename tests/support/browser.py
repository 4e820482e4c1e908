"""Debian's Chromium, as the browser tests launch it through Playwright, where they put their
screenshots, and what they do in a page: log in, ask, wait for the answer. The live server they
drive is tests.support.live_server.daphne_server.

The browser is Debian's Chromium headless shell (package `chromium-headless-shell`, built from
the same `chromium` source and version as `/usr/bin/chromium`: the same Blink and V8 without
the desktop browser around them); why: docs/decisions/0170-the-suite-in-parallel-workers.md,
"Thirteenth round"."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

CHROMIUM = "/usr/bin/chromium-headless-shell"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(settings.BASE_DIR) / "test-artifacts"
# The browser tests' staff users sign in with this password.
PASSWORD = "browser-pass-2026"
DEMO = Path(settings.BASE_DIR) / "demo"
IDLE = """() => {
  const state = document.getElementById('chat-state');
  return state && state.dataset.busy === 'false'
    && !document.querySelector('#messages [data-status="streaming"]');
}"""


@dataclass
class Live:
    url: str
    sources: list[str]
    show_more_conversation: str
    sessions: dict[str, dict] = field(default_factory=dict)


def warm_up(url: str, user) -> None:
    """Ask one question over the WebSocket so the server loads the embedding model before
    the first test measures anything."""
    import json

    from django.test import Client
    from websockets.sync.client import connect

    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    socket_url = url.replace("http://", "ws://") + f"/ws/chat/{uuid.uuid4()}/"
    with connect(socket_url, additional_headers={"Cookie": cookie, "Origin": url}) as socket:
        question = "Warm-up: what is a leave year?"
        payload = {"action": "send", "message": question, "message_id": str(uuid.uuid4())}
        socket.send(json.dumps(payload))
        while True:
            fragment = socket.recv(timeout=180)
            if 'id="chat-state"' in fragment and 'data-busy="false"' in fragment:
                return


@dataclass
class Pages:
    """Opens logged-in pages; records dialogs, script errors and Content-Security-Policy
    violations, which must never happen."""

    browser: object
    live: Live
    contexts: list = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    pending: dict[int, dict[int, str]] = field(default_factory=dict)

    def open(self, username: str = "anna", path: str = "/", **context_options):
        options = {"viewport": {"width": 1280, "height": 860}, **context_options}
        if username:
            options["storage_state"] = self.session_of(username)
        context = self.browser.new_context(base_url=self.live.url, **options)
        self.contexts.append(context)
        page = context.new_page()
        page.on("dialog", self._dialog)
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("console", self._console)
        self._requests_follow(page)
        page.goto(path)
        return page

    def settled(self, page, timeout: float = 30_000) -> None:
        """Wait until `page` has made no request for 500 ms (Playwright's "networkidle");
        when it does not settle in `timeout` ms, fail naming the requests still open."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        try:
            page.wait_for_load_state("networkidle", timeout=timeout)
        except PlaywrightTimeout:
            open_requests = sorted(self.pending.get(id(page), {}).values())
            raise AssertionError(
                f"{page.url} made requests for {timeout / 1000:.0f} s without a 500 ms pause; "
                f"still open: {open_requests or 'none'}"
            ) from None

    def _requests_follow(self, page) -> None:
        """Keep the requests of `page` still open (`pending`), for `settled`'s message."""
        pending = self.pending.setdefault(id(page), {})

        def opened(request) -> None:
            pending[id(request)] = f"{request.method} {request.url}"

        def closed(request) -> None:
            pending.pop(id(request), None)

        page.on("request", opened)
        page.on("requestfinished", closed)
        page.on("requestfailed", closed)

    def _console(self, message) -> None:
        # The Content-Security-Policy header: anything it blocks is a script error too.
        if "Content Security Policy" in message.text:
            self.errors.append(message.text)

    def _dialog(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def session_of(self, username: str) -> dict:
        if username not in self.live.sessions:
            context = self.browser.new_context(base_url=self.live.url)
            page = context.new_page()
            login(page, username)
            self.live.sessions[username] = context.storage_state()
            context.close()
        return self.live.sessions[username]

    def close(self) -> None:
        for context in self.contexts:
            context.close()


def login(page, username: str) -> None:
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/")


def ask(page, question: str) -> None:
    """Type a question, press Enter, wait until its answer is complete."""
    asked = page.locator('#messages [data-role="user"]').count()
    page.locator("#composer-input").fill(question)
    page.locator("#composer-input").press("Enter")
    page.wait_for_function(
        f"() => document.querySelectorAll('#messages [data-role=\"user\"]').length > {asked}"
    )
    page.wait_for_function(IDLE, timeout=30_000)


# Resolves once every time-based animation and transition of finite length on the page has
# ended, waiting two frames first so that one a class change has just started is among them.
# Scroll-driven animations (their timeline is not the document's) end only with a scroll.
_ANIMATIONS_ENDED = """async () => {
  for (let frame = 0; frame < 2; frame++) {
    await new Promise((resolve) => requestAnimationFrame(resolve));
  }
  const finite = document.getAnimations().filter(
    (animation) => animation.timeline === document.timeline && animation.effect
      && animation.effect.getComputedTiming().endTime !== Infinity);
  await Promise.all(finite.map((animation) => animation.finished.catch(() => null)));
}"""


def animations_ended(page) -> None:
    """Wait until the page's transitions and animations (the drawer sliding in, a dialog
    fading) have ended; endless ones (a spinner) and scroll-driven ones are not waited for."""
    page.evaluate(_ANIMATIONS_ENDED)


def last_answer(page):
    return page.locator('#messages [data-role="assistant"]').last


def wait_in_view(page, element_id: str, scroller_id: str) -> None:
    """Until the element's top is inside the visible part of its scrolling container."""
    page.wait_for_function(
        """([id, scroller]) => {
          const box = document.getElementById(id).getBoundingClientRect();
          const view = document.getElementById(scroller).getBoundingClientRect();
          return box.top >= view.top && box.top < view.bottom;
        }""",
        arg=[element_id, scroller_id],
        timeout=5_000,
    )


def screenshot(page, name: str, **options) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), **options)


# The trace categories main_thread_cpu_ms reads: the scheduler's tasks, with their thread time,
# and the page's performance.mark()s.
CPU_TRACE_CATEGORIES = ["toplevel", "blink.user_timing"]


def main_thread_cpu_ms(trace: bytes, start_mark: str, end_mark: str) -> float:
    """The CPU time of the page's main thread from the task in which the page set
    `performance.mark(start_mark)` to the one in which it set `end_mark`, both counted whole,
    from a Chromium trace (Playwright's `browser.stop_tracing()`) of CPU_TRACE_CATEGORIES.

    It is the thread time of the scheduler's top-level tasks (their `tdur`), not the wall
    clock: what the page itself computed (script, style, layout, paint), which what else the
    machine runs at the same time does not lengthen. Raises AssertionError when either mark
    or any task in between is missing from the trace."""
    import json

    loaded = json.loads(trace)
    events = loaded["traceEvents"] if isinstance(loaded, dict) else loaded
    marks = {event["name"]: event for event in events if event.get("cat") == "blink.user_timing"}
    assert start_mark in marks and end_mark in marks, f"marks not in the trace: {sorted(marks)}"
    start, end = marks[start_mark], marks[end_mark]
    thread = (start["pid"], start["tid"])
    tasks = sorted(
        (
            event
            for event in events
            if event.get("name") == "ThreadControllerImpl::RunTask"
            and event.get("ph") == "X"
            and (event["pid"], event["tid"]) == thread
            and event["ts"] + event["dur"] >= start["ts"]
            and event["ts"] <= end["ts"]
        ),
        key=lambda event: event["ts"],
    )
    assert tasks and all("tdur" in task for task in tasks), "no thread times in the trace"
    cpu_us, counted_until = 0, 0
    for task in tasks:
        if task["ts"] >= counted_until:  # a task nested in one counted already is in its time
            cpu_us += task["tdur"]
            counted_until = task["ts"] + task["dur"]
    return cpu_us / 1000
