/* Sourced: the small amount of browser behaviour htmx does not cover.
 *
 * The conversation streams over the htmx WebSocket extension: the server sends HTML fragments
 * and htmx swaps them in. This file adds the composer's keys, the stream state (busy / idle,
 * Stop, the URL of a new conversation), citation badges, copy, dialogs and reconnection.
 * It never inserts server or user text as HTML: only textContent and attributes.
 */
(function () {
  "use strict";

  var state = {
    busy: false,
    socket: null,
    recalled: false,
    lastQuestion: "",
    lastPayload: null,
    stickToBottom: true,
    newChat: null, /* the new chat's main area, fetched ahead (prefetchNewChat) */
    shownPath: "", /* the address shown after a new chat in place */
  };

  function $(selector, root) {
    return (root || document).querySelector(selector);
  }

  function $all(selector, root) {
    return Array.prototype.slice.call((root || document).querySelectorAll(selector));
  }

  function uuid4() {
    if (window.crypto && typeof window.crypto.randomUUID === "function") {
      try {
        return window.crypto.randomUUID();
      } catch (e) {
        /* insecure context: fall through */
      }
    }
    var bytes = window.crypto.getRandomValues(new Uint8Array(16));
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    var hex = Array.prototype.map
      .call(bytes, function (b) {
        return (b + 0x100).toString(16).slice(1);
      })
      .join("");
    return [hex.slice(0, 8), hex.slice(8, 12), hex.slice(12, 16), hex.slice(16, 20), hex.slice(20)].join("-");
  }

  /* ---------------------------------------------------------------- composer */

  function composer() {
    return $("#composer-input");
  }

  function autosize() {
    var input = composer();
    if (!input) return;
    input.style.height = "auto";
    input.style.height = Math.min(input.scrollHeight, 240) + "px";
  }

  function updateControls() {
    var input = composer();
    var send = $("#send-button");
    var stop = $("#stop-button");
    var chat = $("#chat");
    if (chat) chat.setAttribute("data-busy", state.busy ? "true" : "false");
    if (send) send.disabled = state.busy || !input || input.value.trim() === "";
    if (stop) {
      stop.classList.toggle("hidden", !state.busy);
    }
    $all("[data-regenerate]").forEach(function (button) {
      button.disabled = state.busy;
    });
  }

  function setComposer(text, opts) {
    var input = composer();
    if (!input) return;
    input.value = text;
    state.recalled = Boolean(opts && opts.recalled);
    autosize();
    updateControls();
    input.focus();
    var end = input.value.length;
    input.setSelectionRange(end, end);
  }

  function focusComposer() {
    var input = composer();
    if (input && !input.disabled) input.focus();
  }

  function sendPayload(payload) {
    if (!state.socket) {
      showConnection("Not connected — retrying…");
      return false;
    }
    state.socket.send(JSON.stringify(payload), $("#chat"));
    return true;
  }

  function composerPayload(form, message) {
    var data = new FormData(form);
    var topK = parseInt(data.get("top_k"), 10);
    return {
      action: "send",
      message: message,
      message_id: uuid4(),
      top_k: isNaN(topK) ? null : topK,
      document_ids: data.getAll("document_ids").map(function (v) {
        return parseInt(v, 10);
      }),
      is_private: data.get("is_private") === "true",
      file_ids: data.getAll("file_ids").map(function (v) {
        return parseInt(v, 10);
      }),
    };
  }

  /* "New chat" is disabled while the chat is empty: enabled by its first question. */
  function enableNewChat() {
    var link = $("#new-chat-button");
    if (!link || !link.hasAttribute("aria-disabled")) return;
    link.setAttribute("href", link.getAttribute("data-href"));
    link.removeAttribute("aria-disabled");
    link.removeAttribute("role");
    link.classList.remove("btn-disabled");
    prefetchNewChat();
  }

  function afterFirstSend() {
    enableNewChat();
    var empty = $("#empty-state");
    if (empty) empty.remove();
    var privacy = $("#privacy-control");
    if (privacy) privacy.remove();
    var chat = $("#chat");
    if (chat) chat.setAttribute("data-new", "false");
  }

  function onComposerKeydown(event) {
    var input = event.target;
    var modified = event.shiftKey || event.altKey || event.ctrlKey || event.metaKey;
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (!state.busy && input.value.trim() !== "") {
        input.form.requestSubmit();
      }
      return;
    }
    if (event.key === "Escape") {
      if (input.value !== "") {
        event.preventDefault();
        setComposer("");
      }
      return;
    }
    var singleLine = input.value.indexOf("\n") === -1;
    if (event.key === "ArrowUp" && !modified) {
      if (input.value === "") {
        var last = state.lastQuestion || (input.form && input.form.getAttribute("data-last-question")) || "";
        if (last) {
          event.preventDefault();
          setComposer(last, { recalled: true });
        }
      } else if (singleLine) {
        event.preventDefault();
        input.setSelectionRange(0, 0);
      }
      return;
    }
    if (event.key === "ArrowDown" && !modified) {
      if (state.recalled) {
        event.preventDefault();
        setComposer("");
      } else if (input.value !== "" && singleLine) {
        event.preventDefault();
        var end = input.value.length;
        input.setSelectionRange(end, end);
      }
    }
  }

  /* ---------------------------------------------------------------- stream state */

  function applyState() {
    var el = $("#chat-state");
    if (!el) return;
    var wasBusy = state.busy;
    state.busy = el.getAttribute("data-busy") === "true";
    var url = el.getAttribute("data-conversation-url");
    if (url && window.location.pathname !== url) {
      window.history.replaceState(null, "", url);
      if (state.shownPath) state.shownPath = url;
    }
    var title = $("[data-conversation-title]");
    if (title && url) document.title = title.textContent.trim() + " · Sourced";
    updateControls();
    if (wasBusy && !state.busy) {
      var active = document.activeElement;
      if (!active || active === document.body || active.id === "stop-button" || active.closest("#messages")) {
        focusComposer();
      }
    }
  }

  function scroller() {
    return $("#scroller");
  }

  function nearBottom() {
    var box = scroller();
    if (!box) return false;
    return box.scrollHeight - box.scrollTop - box.clientHeight < 120;
  }

  function scrollToBottom() {
    var box = scroller();
    if (box) box.scrollTop = box.scrollHeight;
  }

  function showConnection(label) {
    var status = $("#connection-status");
    if (!status) return;
    if (label) {
      var text = $("[data-connection-label]", status);
      if (text) text.textContent = label;
      status.classList.remove("hidden");
      status.classList.add("flex");
    } else {
      status.classList.add("hidden");
      status.classList.remove("flex");
    }
  }

  function markInterrupted() {
    /* The connection dropped mid-answer: keep what arrived, say so, offer Retry. */
    $all('#messages [data-status="streaming"]').forEach(function (bubble) {
      bubble.setAttribute("data-status", "disconnected");
      var typing = bubble.querySelector(".loading");
      if (typing) typing.remove();
      var body = bubble.querySelector(".chat-bubble");
      if (!body || body.querySelector("[data-connection-error]")) return;
      var alert = document.createElement("div");
      alert.setAttribute("role", "alert");
      alert.setAttribute("data-connection-error", "");
      alert.className = "alert alert-error alert-soft mt-3 py-2 text-sm";
      var text = document.createElement("span");
      text.textContent = "Connection lost — the answer above is incomplete.";
      var retry = document.createElement("button");
      retry.type = "button";
      retry.className = "btn btn-sm";
      retry.setAttribute("data-retry", "");
      retry.textContent = "Retry";
      alert.appendChild(text);
      alert.appendChild(retry);
      body.appendChild(alert);
    });
    toastErrors();
  }

  /* ---------------------------------------------------------------- htmx events */

  document.addEventListener("htmx:wsConfigSend", function (event) {
    var form = event.target;
    if (!form || form.id !== "composer") return;
    var input = composer();
    var message = input ? input.value.trim() : "";
    if (state.busy || message === "") {
      event.preventDefault();
      return;
    }
    var payload = composerPayload(form, message);
    event.detail.messageBody = JSON.stringify(payload);
    state.lastPayload = payload;
    state.lastQuestion = message;
    form.setAttribute("data-last-question", message);
    state.busy = true;
    state.stickToBottom = true;
    setComposer("");
    afterFirstSend();
    focusComposer();
  });

  document.addEventListener("htmx:wsBeforeMessage", function () {
    state.stickToBottom = nearBottom();
  });

  document.addEventListener("htmx:wsAfterMessage", function () {
    applyState();
    clampAnswers();
    toastErrors();
    if (state.stickToBottom) scrollToBottom();
  });

  /* ---------------------------------------------------------------- skeletons */

  /* A history search replaces the results by skeleton rows until the next page arrives. */
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.hasAttribute || !form.hasAttribute("data-history-search")) return;
    var skeleton = $("#history-skeleton");
    var body = $("#history-body");
    if (!skeleton || !body) return;
    body.hidden = true;
    skeleton.hidden = false;
  });

  window.addEventListener("pageshow", function () {
    /* Back to a page kept by the browser: its results again, not the skeleton. */
    var skeleton = $("#history-skeleton");
    var body = $("#history-body");
    if (skeleton) skeleton.hidden = true;
    if (body) body.hidden = false;
  });

  /* ---------------------------------------------------------------- toasts */

  /* Errors are said where they happen (the answer, the notice) and also in a toast at the
     bottom corner, with Retry when there is a question to send again. */
  function toast(text, retry) {
    var box = document.getElementById("toasts");
    if (!box) {
      box = document.createElement("div");
      box.id = "toasts";
      box.className = "toast toast-end toast-bottom z-50";
      document.body.appendChild(box);
    }
    var alert = document.createElement("div");
    alert.setAttribute("role", "alert");
    alert.setAttribute("data-toast", "");
    alert.className = "alert alert-error shadow-lg text-sm";
    var label = document.createElement("span");
    label.textContent = text;
    alert.appendChild(label);
    if (retry) {
      var again = document.createElement("button");
      again.type = "button";
      again.className = "btn btn-sm";
      again.setAttribute("data-retry", "");
      again.textContent = "Retry";
      alert.appendChild(again);
    }
    var close = document.createElement("button");
    close.type = "button";
    close.className = "btn btn-ghost btn-sm btn-square";
    close.setAttribute("aria-label", "Dismiss");
    close.setAttribute("data-toast-close", "");
    close.textContent = "\u00d7";
    alert.appendChild(close);
    box.appendChild(alert);
    window.setTimeout(function () {
      alert.remove();
    }, 15000);
  }

  var TOASTED_ERRORS = '[data-notice].alert-error, #messages [data-status="error"] [role="alert"], [data-connection-error]';

  function toastErrors() {
    $all(TOASTED_ERRORS).forEach(
      function (node) {
        if (node.hasAttribute("data-toasted")) return;
        node.setAttribute("data-toasted", "");
        var text = node.textContent.replace(/\s*Retry\s*$/, "").trim();
        toast(text, !!state.lastPayload);
      }
    );
  }

  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    var reason = xhr && xhr.status === 409 ? "The request conflicts with work in progress." : "The request failed.";
    var page = xhr && xhr.responseText ? new DOMParser().parseFromString(xhr.responseText, "text/html") : null;
    var said = page ? page.querySelector("[data-reason], main p") : null;
    toast(said && said.textContent.trim() ? said.textContent.trim() : reason, false);
  });

  /* A fragment appended to #messages replaces an element of the same id already there (a
     retried question, a repeated answer) instead of duplicating it. */
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var target = event.detail.target;
    var fragment = event.detail.fragment;
    if (!target || target.id !== "messages" || !fragment || !fragment.children) return;
    Array.prototype.slice.call(fragment.children).forEach(function (child) {
      if (!child.id) return;
      var existing = document.getElementById(child.id);
      if (existing && existing !== child) {
        existing.replaceWith(child);
        window.htmx.process(child);
      }
    });
  });

  document.addEventListener("htmx:wsOpen", function (event) {
    state.socket = event.detail.socketWrapper;
    showConnection(null);
    autosend();
  });

  /* htmx reconnects by itself after an abnormal closure (1006, 1011-1013); a server going
     away (1001) or any other unexpected code is retried here. 4401/4403: no access, final;
     4429: too many of the user's sockets open (chat/socket_limits.py), final too. */
  var HTMX_RECONNECTS = [1006, 1011, 1012, 1013];

  document.addEventListener("htmx:wsClose", function (event) {
    var detail = event.detail || {};
    var code = detail.event ? detail.event.code : 0;
    if (state.busy) {
      markInterrupted();
      state.busy = false;
      updateControls();
    }
    state.socket = null;
    if (code === 4401) {
      showConnection("Signed out — reload the page to log in again");
      return;
    }
    if (code === 4403) {
      showConnection("No access to this conversation");
      return;
    }
    if (code === 4429) {
      showConnection("Too many chat tabs open — close some, then reload this page");
      return;
    }
    showConnection("Reconnecting…");
    if (HTMX_RECONNECTS.indexOf(code) === -1 && detail.socketWrapper) {
      window.setTimeout(function () {
        if (!state.socket && document.getElementById("chat")) detail.socketWrapper.reconnect();
      }, 1000);
    }
  });

  /* A page opened as /c/new?q=... sends its pre-filled question once, over the socket
     (docs/decisions/0125-a-question-in-a-link.md). */
  function autosend() {
    var form = $("#composer");
    if (!form || !form.hasAttribute("data-autosend")) return;
    form.removeAttribute("data-autosend");
    var input = composer();
    if (input && input.value.trim() !== "") form.requestSubmit();
  }

  /* ---------------------------------------------------------------- long answers */

  /* A finished answer taller than CLAMP_ABOVE pixels is clamped (.answer-clamped) with a
     "Show more" button after it; the button toggles the whole answer. */
  var CLAMP_ABOVE = 560;

  function clampAnswers() {
    $all('#messages [data-role="assistant"]:not([data-status="streaming"]) .answer-body').forEach(function (body) {
      if (body.hasAttribute("data-clamp-checked")) return;
      body.setAttribute("data-clamp-checked", "");
      if (body.scrollHeight <= CLAMP_ABOVE) return;
      body.classList.add("answer-clamped");
      var button = document.createElement("button");
      button.type = "button";
      button.className = "btn btn-ghost btn-xs mt-1";
      button.setAttribute("data-clamp-toggle", body.id);
      button.setAttribute("aria-controls", body.id);
      button.setAttribute("aria-expanded", "false");
      button.textContent = "Show more";
      body.insertAdjacentElement("afterend", button);
    });
  }

  function toggleClamp(button) {
    var body = document.getElementById(button.getAttribute("data-clamp-toggle"));
    if (!body) return;
    var expand = body.classList.contains("answer-clamped");
    body.classList.toggle("answer-clamped", !expand);
    button.setAttribute("aria-expanded", expand ? "true" : "false");
    button.textContent = expand ? "Show less" : "Show more";
  }

  /* ---------------------------------------------------------------- clicks */

  function revealSource(id) {
    var source = document.getElementById(id);
    if (!source) return;
    var footer = source.closest("details[data-sources-footer]");
    if (footer) footer.open = true;
    var more = source.closest("[data-more-sources]");
    if (more && more.hidden) {
      var toggle = $('[data-show-more="' + more.id + '"]');
      if (toggle) toggleMore(toggle);
    }
    source.scrollIntoView({ behavior: "smooth", block: "center" });
    source.classList.add("ring-2", "ring-primary");
    window.setTimeout(function () {
      source.classList.remove("ring-2", "ring-primary");
    }, 1600);
    var summary = source.querySelector("summary");
    if (summary) summary.focus({ preventScroll: true });
  }

  function toggleMore(button) {
    var target = document.getElementById(button.getAttribute("data-show-more"));
    if (!target) return;
    var show = target.hidden;
    target.hidden = !show;
    button.setAttribute("aria-expanded", show ? "true" : "false");
    var label = $("[data-show-more-label]", button);
    if (label) {
      if (!button.hasAttribute("data-label-more")) button.setAttribute("data-label-more", label.textContent);
      label.textContent = show ? "Show fewer sources" : button.getAttribute("data-label-more");
    }
  }

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text);
    }
    return new Promise(function (resolve, reject) {
      var area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.className = "fixed -left-[9999px] top-0";
      document.body.appendChild(area);
      area.select();
      var ok = document.execCommand("copy");
      area.remove();
      if (ok) resolve();
      else reject(new Error("copy failed"));
    });
  }

  function openDeleteDialog(button) {
    var dialog = $("#delete-dialog");
    if (!dialog) return;
    var form = $("[data-delete-form]", dialog);
    form.setAttribute("action", button.getAttribute("data-delete-url"));
    var next = $('input[name="next"]', form);
    if (!next) {
      next = document.createElement("input");
      next.type = "hidden";
      next.name = "next";
      form.appendChild(next);
    }
    next.value = window.location.pathname;
    $("[data-delete-dialog-name]", dialog).textContent = button.getAttribute("data-delete-title") || "";
    dialog.showModal();
  }

  document.addEventListener("click", function (event) {
    var el = event.target.closest(
      "[data-cite], [data-suggestion], [data-rephrase], [data-copy], [data-regenerate], [data-retry], " +
        "#stop-button, [data-show-more], [data-open-dialog], [data-close-dialog], [data-delete-url], " +
        "[data-history-back], [data-reset-settings], [data-clamp-toggle], [data-drawer-toggle], [data-toast-close]"
    );
    if (!el) return;
    if (el.hasAttribute("data-toast-close")) {
      el.closest("[data-toast]").remove();
      return;
    }
    if (el.hasAttribute("data-cite")) {
      event.preventDefault();
      revealSource(el.getAttribute("data-cite"));
    } else if (el.hasAttribute("data-suggestion")) {
      setComposer(el.getAttribute("data-suggestion"));
    } else if (el.hasAttribute("data-rephrase")) {
      setComposer(el.getAttribute("data-rephrase"));
      var input = composer();
      if (input) input.select();
    } else if (el.hasAttribute("data-copy")) {
      var label = $("[data-copy-label]", el);
      copyText(el.getAttribute("data-copy")).then(
        function () {
          if (label) label.textContent = "Copied";
          window.setTimeout(function () {
            if (label) label.textContent = "Copy";
          }, 1500);
        },
        function () {
          if (label) label.textContent = "Copy failed";
        }
      );
    } else if (el.hasAttribute("data-regenerate")) {
      if (state.busy) return;
      if (sendPayload({ action: "regenerate", message_id: el.getAttribute("data-regenerate"), top_k: currentTopK() })) {
        state.busy = true;
        updateControls();
      }
    } else if (el.hasAttribute("data-retry")) {
      if (state.busy || !state.lastPayload) return;
      var payload = Object.assign({}, state.lastPayload, { action: "retry" });
      if (sendPayload(payload)) {
        $all("[data-connection-error], [data-notice], [data-toast]").forEach(function (node) {
          node.remove();
        });
        state.busy = true;
        updateControls();
      }
    } else if (el.id === "stop-button") {
      sendPayload({ action: "stop" });
    } else if (el.hasAttribute("data-show-more")) {
      toggleMore(el);
    } else if (el.hasAttribute("data-open-dialog")) {
      var dialog = document.getElementById(el.getAttribute("data-open-dialog"));
      if (dialog) dialog.showModal();
    } else if (el.hasAttribute("data-close-dialog")) {
      var parent = el.closest("dialog");
      if (parent) parent.close();
    } else if (el.hasAttribute("data-delete-url")) {
      event.preventDefault();
      openDeleteDialog(el);
    } else if (el.hasAttribute("data-history-back")) {
      if (window.history.length > 1) window.history.back();
      else window.location.href = "/";
    } else if (el.hasAttribute("data-drawer-toggle")) {
      var toggle = document.getElementById("sidebar-toggle");
      if (toggle) toggle.checked = !toggle.checked;
    } else if (el.hasAttribute("data-clamp-toggle")) {
      toggleClamp(el);
    } else if (el.hasAttribute("data-reset-settings")) {
      var value = el.getAttribute("data-default-top-k");
      $all("#top-k-input, #top-k-range").forEach(function (node) {
        node.value = value;
      });
      $all('input[name="document_ids"]').forEach(function (node) {
        node.checked = false;
      });
      updateSettingsSummary();
    }
  });

  /* ---------------------------------------------------------------- settings */

  function currentTopK() {
    var input = $("#top-k-input");
    var value = input ? parseInt(input.value, 10) : NaN;
    return isNaN(value) ? null : value;
  }

  function updateSettingsSummary() {
    var summary = $("#settings-summary");
    if (!summary) return;
    var topK = currentTopK() || "";
    var picked = $all('input[name="document_ids"]:checked').length;
    summary.textContent =
      "Top " + topK + " · " + (picked === 0 ? "All documents" : picked + " document" + (picked === 1 ? "" : "s"));
  }

  document.addEventListener("input", function (event) {
    var el = event.target;
    if (el.id === "composer-input") {
      state.recalled = false;
      autosize();
      updateControls();
    } else if (el.hasAttribute && el.hasAttribute("data-mirror")) {
      var other = document.getElementById(el.getAttribute("data-mirror"));
      var value = Math.max(1, Math.min(20, parseInt(el.value, 10) || 1));
      if (other) other.value = value;
      updateSettingsSummary();
    }
  });

  document.addEventListener("change", function (event) {
    var el = event.target;
    if (el.name === "document_ids") updateSettingsSummary();
    if (el.id === "show-citations") {
      /* Shown at once; the dialog's form stores it for the account (hx-trigger="change"). */
      var chat = $("#chat");
      if (chat) chat.setAttribute("data-show-citations", el.checked ? "true" : "false");
    }
    if (el.id === "top-k-input") {
      el.value = Math.max(1, Math.min(20, parseInt(el.value, 10) || 1));
      updateSettingsSummary();
    }
  });

  document.addEventListener("keydown", function (event) {
    var drawer = document.getElementById("sidebar-toggle");
    if (event.key === "Escape" && drawer && drawer.checked) {
      /* Escape closes the conversation list's drawer (small screens). */
      drawer.checked = false;
      var opener = $("[data-drawer-toggle]");
      if (opener) opener.focus();
      return;
    }
    if (event.target && event.target.id === "composer-input") {
      onComposerKeydown(event);
    } else if (event.key === "Escape" && event.target.hasAttribute && event.target.hasAttribute("data-rename-input")) {
      /* Escape closes the title editor unchanged. */
      event.preventDefault();
      var cancel = event.target.form && $("[data-rename-cancel]", event.target.form);
      if (cancel) cancel.click();
    }
  });

  /* ---------------------------------------------------------------- rename */

  /* The title editor opens with its text selected, ready to be typed over. */
  document.addEventListener("htmx:load", function (event) {
    var input = event.target.querySelector ? $("[data-rename-input]", event.target) : null;
    if (input && document.activeElement === input) input.select();
  });

  /* ---------------------------------------------------------------- new chat */

  /* "New chat" from an open conversation without a page load: the new chat's main area
     (what the link's page would show: an empty composer, a socket to a new conversation id)
     is fetched ahead, once the page is idle, and swapped in on the click (htmx closes the old
     conversation's socket and opens the new one's), the address becoming the link's. The
     link stays a plain link: without script, while an answer streams, or before the fetch
     has come back, it loads the page (docs/decisions/0165-clear-conversation-and-the-page-details.md). */
  function prefetchNewChat() {
    var link = $("#new-chat-button");
    state.newChat = null;
    if (!link || !$("#chat") || !window.fetch || !window.DOMParser) return;
    var url = link.getAttribute("data-href");
    window
      .fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) {
        return response.ok && !response.redirected ? response.text() : null;
      })
      .then(function (html) {
        if (!html) return;
        var page = new DOMParser().parseFromString(html, "text/html");
        var main = page.getElementById("main");
        if (main && main.querySelector("#chat[data-new='true']")) {
          state.newChat = { url: url, title: page.title, html: main.innerHTML };
        }
      })
      .catch(function () {
        state.newChat = null;
      });
  }

  function newChatShow(event) {
    var ready = state.newChat;
    if (!ready || state.busy || !window.htmx || event.button !== 0) return;
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    state.newChat = null;
    state.socket = null;
    state.lastQuestion = "";
    state.lastPayload = null;
    state.recalled = false;
    /* The sidebar first, so that the page is styled once, when htmx focuses the new composer. */
    $all("#conversation-list [aria-current='page']").forEach(function (item) {
      item.removeAttribute("aria-current");
      item.classList.remove("menu-active", "font-medium");
    });
    var link = $("#new-chat-button");
    link.removeAttribute("href");
    link.setAttribute("role", "link");
    link.setAttribute("aria-disabled", "true");
    link.classList.add("btn-disabled");
    /* The old conversation's messages go without htmx's clean-up, which dispatches two events
       for every element it removes: all they hold of htmx is the rating forms' listeners, which
       go with them, so htmx's part of the swap does not grow with the conversation. */
    var messages = $("#messages");
    if (messages) messages.replaceChildren();
    window.htmx.swap($("#main"), ready.html, { swapStyle: "innerHTML" });
    window.history.pushState({ newChat: true }, "", ready.url);
    state.shownPath = window.location.pathname;
    document.title = ready.title;
    autosize();
    updateControls();
    updateSettingsSummary();
    focusComposer();
  }

  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("#new-chat-button[href]");
    if (link) newChatShow(event);
  });

  /* Back or forward after a new chat shown in place: the page of that address (a move
     within the page, to a #fragment, changes nothing). */
  window.addEventListener("popstate", function () {
    if (state.shownPath && window.location.pathname !== state.shownPath) window.location.reload();
  });

  /* ---------------------------------------------------------------- page load */

  function init() {
    $all(TOASTED_ERRORS).forEach(function (node) {
      node.setAttribute("data-toasted", ""); /* errors the page loaded with: no toast */
    });
    var form = $("#composer");
    if (form) state.lastQuestion = form.getAttribute("data-last-question") || "";
    autosize();
    updateControls();
    updateSettingsSummary();
    clampAnswers();
    if ($("#messages")) scrollToBottom();
    var highlighted = $("[data-highlighted]");
    if (highlighted) highlighted.scrollIntoView({ block: "center", behavior: "instant" });
    if ($("#new-chat-button[href]")) {
      (window.requestIdleCallback || window.setTimeout)(prefetchNewChat);
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
