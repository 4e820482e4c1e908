"""One document parsed in a child process that cannot take the caller down with it.

`document_parse_isolated` runs `document_parse` (knowledge/parsers/__init__.py), OCR included,
in a child process with an address-space limit (settings.PARSE_MEMORY_LIMIT, 1.5 GB) and a
time limit of its own (the parser's, `parse_time_limit`, and PARSE_CHILD_GRACE_SECONDS more,
then the child is killed). A file that needs more memory than the limit (a bomb nobody has
thought of yet) fails alone with a readable `DocumentParseError` ("Reading X needed more than
1.5 GB of memory …"); the worker, the web server and PostgreSQL beside them go on.

The children are forked by one multiprocessing fork server per process, started at the first
parse and reused: it has imported the parsers and the libraries they use
(knowledge/parsers/preload.py) and nothing else, so the embedding model and the database
connections are never in a child, and a child costs a fork instead of a Python start and
three seconds of imports. The parse result comes back pickled through the child's pipe, and
the progress messages a slow parser sends ("OCR: page 3 of 10") on the way.

The parser is taken from `PARSERS` here, in the caller, and sent to the child by reference
(module and name), with the settings the parsers read (`PARSER_SETTINGS`), so what a test or
an operator changes in this process holds in the child. Why and what it costs per document:
docs/decisions/0147-a-parse-that-cannot-kill-the-worker.md.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path

from django.conf import settings

from knowledge import parsers
from knowledge.parsers.base import DocumentParseError, ParsedDocument, UnsupportedFileType

# The settings the parsers read, set in the child as they are here (a test's overrides too).
PARSER_SETTINGS = (
    "OCR_LANGUAGES",
    "OCR_MAX_PAGES",
    "OCR_MAX_SECONDS",
    "OCR_MAX_PIXELS",
    "SPREADSHEET_MAX_ROWS",
    "SPREADSHEET_MAX_CELLS",
)
# The child's own time limit (in the child: SIGALRM) comes first; past it and this, the caller
# kills the child (a parser stuck in C code that never returns to Python).
PARSE_CHILD_GRACE_SECONDS = 10.0
# "__main__": the main script is run (as __mp_main__, guarded code skipped) once in the server,
# not once in every child as multiprocessing would otherwise do.
_PRELOAD = ["__main__", "knowledge.parsers.preload"]


def memory_label(limit: int) -> str:
    """A memory limit in bytes for a message: "1.5 GB", "800 MB"."""
    if limit >= 2**30:
        return f"{limit / 2**30:.3g} GB"
    return f"{limit / 2**20:.0f} MB"


def document_parse_isolated(
    *, data: bytes, name: str, progress: Callable[[str], None] | None = None
) -> ParsedDocument:
    """`document_parse(data=data, name=name, progress=progress)`, run in a child process
    within settings.PARSE_MEMORY_LIMIT bytes of address space (0: no limit) and the parser's
    time limit. Raises what `document_parse` raises, and `DocumentParseError` when the child
    ran out of memory, out of time, or died."""
    suffix = Path(name).suffix.lower()
    parsers.file_type_check(name)  # raises UnsupportedFileType here, as document_parse does
    time_limit = parsers.parse_time_limit(suffix)
    memory_limit = int(settings.PARSE_MEMORY_LIMIT)
    request = {
        "data": data,
        "name": name,
        "parser": parsers.PARSERS[suffix],
        "settings": {key: getattr(settings, key) for key in PARSER_SETTINGS},
        "time_limit": parsers.PARSE_TIME_LIMIT_SECONDS,
        "memory_limit": memory_limit,
    }
    context = _context()
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child_main, args=(sender, request), daemon=True)
    child.start()
    sender.close()
    deadline = time.monotonic() + time_limit + PARSE_CHILD_GRACE_SECONDS
    label = Path(name).name
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not receiver.poll(left):
                if time.monotonic() < deadline:
                    continue
                raise DocumentParseError(
                    f"Reading {label} took longer than {time_limit:g} s: the file is too large "
                    "or too complex to read."
                )
            try:
                kind, *payload = receiver.recv()
            except (EOFError, OSError):
                child.join(5)
                message = _death_message(label, child.exitcode, memory_limit)
                raise DocumentParseError(message) from None
            if kind == "progress":
                if progress is not None:
                    progress(payload[0])
            elif kind == "parsed":
                return payload[0]
            elif kind == "memory":
                raise DocumentParseError(
                    f"Reading {label} needed more than {memory_label(memory_limit)} of memory: "
                    "the file is too large or made to exhaust the server, and was stopped."
                )
            else:  # "refused": the parser's own readable error
                error = UnsupportedFileType if payload[0] == "unsupported" else DocumentParseError
                raise error(payload[1])
    finally:
        receiver.close()
        if child.is_alive():
            child.kill()
        child.join(5)
        child.close()


def _death_message(label: str, exitcode: int | None, memory_limit: int) -> str:
    how = f"signal {signal.Signals(-exitcode).name}" if exitcode and exitcode < 0 else "exit"
    return (
        f"Reading {label} stopped the reader ({how}): the file is damaged, or made to exhaust "
        f"the server (the limit is {memory_label(memory_limit)} of memory)."
    )


def _context():
    """The fork server context, its server started once per process with OpenBLAS and
    OpenMP held to one thread (the children inherit it; Tesseract is told the same)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    from multiprocessing import forkserver

    with _environment(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"):
        forkserver.ensure_running()
    return context


@contextmanager
def _environment(**values: str):
    """os.environ with `values` set where unset, restored after."""
    added = {key: value for key, value in values.items() if key not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def _child_main(connection: Connection, request: dict) -> None:
    """In the child: limit the address space, set the parser and the settings, parse, and
    send the result (or the error) to the caller."""
    import resource

    memory_limit = request["memory_limit"]
    if memory_limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    if not settings.configured:
        settings.configure(**request["settings"])
    else:
        for key, value in request["settings"].items():
            setattr(settings, key, value)
    name = request["name"]
    parsers.PARSERS[Path(name).suffix.lower()] = request["parser"]
    parsers.PARSE_TIME_LIMIT_SECONDS = request["time_limit"]

    def progress(message: str) -> None:
        connection.send(("progress", message))

    try:
        parsed = parsers.document_parse(data=request["data"], name=name, progress=progress)
        del request
        connection.send(("parsed", parsed))
    except MemoryError:
        connection.send(("memory",))
    except UnsupportedFileType as exc:
        connection.send(("refused", "unsupported", str(exc)))
    except DocumentParseError as exc:
        if isinstance(exc.__cause__, MemoryError):
            connection.send(("memory",))
        else:
            connection.send(("refused", "parse", str(exc)))
    finally:
        connection.close()
