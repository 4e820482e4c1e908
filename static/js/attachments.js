/* Personal files in the composer (docs/decisions/0081-personal-files.md): the paperclip and
   drag-and-drop upload each file to POST /api/files, a chip per file shows its progress:
   uploading (the request), then reading → ready, or the error, sent by the conversation's
   socket once told which files the page waits for ({"action": "files", "file_ids": [...]},
   docs/decisions/0082-personal-file-progress-over-the-socket.md). A ready chip carries a
   hidden file_ids input the chat payload sends; a question sent while a file is still being
   read waits for it. */
(function () {
  "use strict";

  function list() {
    return document.getElementById("attachments");
  }

  function csrfToken() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
    } catch (e) {
      return "";
    }
  }

  function conversationId() {
    // A new conversation does not exist until its first question: its files are attached
    // then, by the file_ids the question carries.
    var chat = document.getElementById("chat");
    if (!chat || chat.getAttribute("data-new") !== "false") return "";
    var url = chat ? chat.getAttribute("ws-connect") || "" : "";
    var match = url.match(/\/ws\/chat\/([0-9a-f-]{36})\//);
    return match ? match[1] : "";
  }

  function chipFor(name) {
    var chip = document.createElement("li");
    chip.className = "badge badge-soft gap-1.5 py-3";
    chip.setAttribute("data-file-status", "uploading");
    var icon = document.createElement("span");
    icon.className = "icon-[lucide--file-text] size-3.5";
    icon.setAttribute("aria-hidden", "true");
    var label = document.createElement("span");
    label.setAttribute("data-file-name", "");
    label.textContent = name;
    var state = document.createElement("span");
    state.className = "text-xs opacity-70";
    state.setAttribute("data-file-state", "");
    state.textContent = "uploading…";
    var remove = document.createElement("button");
    remove.type = "button";
    remove.className = "btn btn-ghost btn-xs btn-circle";
    remove.setAttribute("data-file-remove", "");
    remove.setAttribute("aria-label", "Remove " + name);
    remove.textContent = "×";
    chip.append(icon, label, state, remove);
    return chip;
  }

  function setState(chip, status, text) {
    chip.setAttribute("data-file-status", status);
    chip.querySelector("[data-file-state]").textContent = text;
    var id = chip.getAttribute("data-file-id");
    var hidden = chip.querySelector('input[name="file_ids"]');
    if (status === "ready" && id && !hidden) {
      hidden = document.createElement("input");
      hidden.type = "hidden";
      hidden.name = "file_ids";
      hidden.value = id;
      hidden.setAttribute("form", "composer");
      chip.appendChild(hidden);
    } else if (status !== "ready" && hidden) {
      hidden.remove();
    }
    if (status === "ready" || status === "failed" || status === "expired") resumeWaiting();
  }

  // The page's socket (htmx-ext-ws): told which files are being read, it sends each one's chip
  // once read (ready or the error), as the worker announces it.
  var socket = null;

  function readingIds() {
    var root = list();
    if (!root) return [];
    return Array.prototype.map.call(
      root.querySelectorAll('[data-file-status="reading"][data-file-id]'),
      function (chip) {
        return parseInt(chip.getAttribute("data-file-id"), 10);
      }
    );
  }

  function follow() {
    var ids = readingIds();
    if (socket && ids.length) socket.send(JSON.stringify({ action: "files", file_ids: ids }));
  }

  function upload(file) {
    var chip = chipFor(file.name);
    list().appendChild(chip);
    var body = new FormData();
    body.append("file", file);
    var conversation = conversationId();
    if (conversation) body.append("conversation_id", conversation);
    fetch("/api/files", {
      method: "POST",
      body: body,
      credentials: "same-origin",
      headers: { "X-CSRFToken": csrfToken() },
    })
      .then(function (response) {
        return response.json().then(function (json) {
          return { ok: response.ok, json: json };
        });
      })
      .then(function (result) {
        if (!result.ok) {
          var message = (result.json.error && result.json.error.message) || "The upload failed.";
          setState(chip, "failed", message);
          return;
        }
        chip.setAttribute("data-file-id", result.json.id);
        chip.id = "file-" + result.json.id;
        setState(chip, "reading", "reading…");
        follow();
      })
      .catch(function () {
        setState(chip, "failed", "The upload failed; try again.");
      });
  }

  function uploadAll(files) {
    Array.prototype.forEach.call(files || [], upload);
  }

  function pending() {
    var root = list();
    return root ? root.querySelectorAll('[data-file-status="uploading"], [data-file-status="reading"]').length : 0;
  }

  var waiting = false;

  function resumeWaiting() {
    if (!waiting || pending()) return;
    waiting = false;
    var notice = document.getElementById("attachments-waiting");
    if (notice) notice.remove();
    var form = document.getElementById("composer");
    if (form) form.requestSubmit();
  }

  // Before the composer's own handler (capture): a question asked while a file is being read
  // waits for it, visibly, then is sent.
  document.addEventListener(
    "htmx:wsConfigSend",
    function (event) {
      var form = event.target;
      if (!form || form.id !== "composer" || !pending()) return;
      event.preventDefault();
      event.stopImmediatePropagation();
      if (!waiting) {
        waiting = true;
        var notice = document.createElement("li");
        notice.id = "attachments-waiting";
        notice.className = "text-xs opacity-80";
        notice.setAttribute("role", "status");
        notice.textContent = "Waiting for your files to be read…";
        list().appendChild(notice);
      }
    },
    true
  );

  document.addEventListener("htmx:wsOpen", function (event) {
    socket = event.detail.socketWrapper;
    follow(); // again after a reconnection: what was read meanwhile is sent at once
  });

  document.addEventListener("htmx:wsClose", function () {
    socket = null;
  });

  // A chip swapped in by the socket (its reading is over) may free a waiting question.
  document.addEventListener("htmx:wsAfterMessage", function () {
    resumeWaiting();
  });

  document.addEventListener("change", function (event) {
    if (event.target && event.target.id === "attach-input") {
      uploadAll(event.target.files);
      event.target.value = "";
    }
  });

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-file-remove]");
    if (!button) return;
    var chip = button.closest("[data-file-status]");
    var id = chip.getAttribute("data-file-id");
    chip.remove();
    if (id) {
      fetch("/api/files/" + id, {
        method: "DELETE",
        credentials: "same-origin",
        headers: { "X-CSRFToken": csrfToken() },
      });
    }
    resumeWaiting();
  });

  document.addEventListener("dragover", function (event) {
    if (event.target.closest && event.target.closest("[data-drop-files]")) event.preventDefault();
  });

  document.addEventListener("drop", function (event) {
    var zone = event.target.closest && event.target.closest("[data-drop-files]");
    if (!zone || !event.dataTransfer || !event.dataTransfer.files.length) return;
    event.preventDefault();
    uploadAll(event.dataTransfer.files);
  });

  document.addEventListener("DOMContentLoaded", function () {
    var root = list();
    if (!root) return;
    root.querySelectorAll('[data-file-status="pending"], [data-file-status="processing"]').forEach(function (chip) {
      chip.setAttribute("data-file-status", "reading");
    });
    root.querySelectorAll('[data-file-status="ready"]').forEach(function (chip) {
      setState(chip, "ready", "ready");
    });
  });
})();
