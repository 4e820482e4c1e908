"""Parsers fuzzed with hypothesis: random bytes, and real files of every format mutated
(truncated, bit-flipped, spliced; for the zip formats also a part of the archive replaced,
truncated or bit-flipped inside a valid zip, so the XML readers behind it are reached).

Whatever the bytes, `document_parse` returns a parsed document or raises DocumentParseError
with a readable message (one line, no traceback, no server path); never anything else. Then
the ingestion service and the `ingest` command over a folder of such files: every broken file
ends `failed` with its message, the good files of the same run are ready and searchable, and
the database holds no chunk of a failed document.

Deterministic (derandomize=True: the same cases on every run) and bounded (MAX_EXAMPLES per
format and strategy).
"""

from __future__ import annotations

import functools
import io
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowledge.models import Chunk, Document, Embedding
from knowledge.parsers import DocumentParseError, document_parse
from tests.support import documents, spreadsheets

pytestmark = pytest.mark.slow

MAX_EXAMPLES = 60  # per format and strategy: 8 formats x 2 strategies x 60 = 960 parses
FUZZ = settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
ZIP_FORMATS = {"docx", "xlsx", "pptx"}
FORMATS = ["pdf", "docx", "html", "md", "txt", "xlsx", "csv", "pptx"]


@functools.cache
def sample(kind: str) -> bytes:
    """A real, valid file of the format (built once per session)."""
    if kind in ("xlsx", "csv", "pptx"):
        with tempfile.TemporaryDirectory(prefix="fuzz-samples-") as folder:
            return _written_sample(kind, Path(folder))
    if kind == "pdf":
        return documents.pdf_bytes()
    if kind == "docx":
        return documents.docx_bytes()
    if kind == "md":
        return documents.MARKDOWN.encode()
    if kind == "html":
        return documents.HTML.encode()
    if kind == "txt":
        return documents.latin1_text_bytes()
    raise ValueError(kind)


def _written_sample(kind: str, folder: Path) -> bytes:
    """A sample its maker writes to a file: written in `folder`, read back."""
    if kind == "xlsx":
        return spreadsheets.inventory_xlsx(folder / "inventory.xlsx").read_bytes()
    if kind == "csv":
        return spreadsheets.price_list_csv(folder / "prices.csv").read_bytes()
    return spreadsheets.deck_pptx(folder / "deck.pptx").read_bytes()


@st.composite
def mutated(draw, kind: str) -> bytes:
    """The sample of `kind`, damaged in one of several ways."""
    data = sample(kind)
    how = draw(
        st.sampled_from(["truncate", "flip", "splice", *(["part"] if kind in ZIP_FORMATS else [])])
    )
    if how == "truncate":
        return data[: draw(st.integers(0, len(data) - 1))]
    if how == "flip":
        damaged = bytearray(data)
        for _ in range(draw(st.integers(1, 16))):
            position = draw(st.integers(0, len(data) - 1))
            damaged[position] ^= 1 << draw(st.integers(0, 7))
        return bytes(damaged)
    if how == "splice":
        start = draw(st.integers(0, len(data)))
        end = draw(st.integers(start, min(len(data), start + 512)))
        return data[:start] + draw(st.binary(max_size=512)) + data[end:]
    return _zip_part_damaged(draw, data)


def _zip_part_damaged(draw, data: bytes) -> bytes:
    """A valid zip whose one part (the main XML part, often) is truncated, bit-flipped, or
    replaced by random bytes."""
    with zipfile.ZipFile(io.BytesIO(data)) as source:
        parts = {info.filename: source.read(info.filename) for info in source.infolist()}
    names = sorted(parts)
    xml = [n for n in names if n.endswith(".xml") and not n.startswith("[")]
    name = draw(st.sampled_from(xml or names))
    content = parts[name]
    change = draw(st.sampled_from(["truncate", "flip", "random", "drop"]))
    if change == "truncate":
        content = content[: draw(st.integers(0, max(0, len(content) - 1)))]
    elif change == "flip":
        damaged = bytearray(content)
        for _ in range(draw(st.integers(1, 8))):
            if damaged:
                damaged[draw(st.integers(0, len(damaged) - 1))] ^= 1 << draw(st.integers(0, 7))
        content = bytes(damaged)
    elif change == "random":
        content = draw(st.binary(max_size=256))
    output = io.BytesIO()
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as target:
        for other in names:
            if other == name and change == "drop":
                continue
            target.writestr(other, content if other == name else parts[other])
    return output.getvalue()


def assert_parses_or_fails_readably(data: bytes, kind: str) -> None:
    try:
        parsed = document_parse(data=data, name=f"fuzzed.{kind}")
    except DocumentParseError as error:
        assert_readable(str(error))
        return
    assert parsed.blocks
    for block in parsed.blocks:
        assert parsed.text[block.char_start : block.char_end] == block.text
        assert "\x00" not in block.text


def assert_readable(message: str) -> None:
    assert message.strip(), "an empty error message"
    assert "\n" not in message, message
    assert "Traceback" not in message and 'File "' not in message, message
    for path in {sys.prefix, str(Path(__file__).resolve().parents[2]), tempfile.gettempdir()}:
        assert path not in message, message


@pytest.mark.parametrize("kind", FORMATS)
def test_random_bytes_never_crash_a_parser(kind):
    @FUZZ
    @given(data=st.binary(min_size=1, max_size=4096))
    def check(data: bytes) -> None:
        assert_parses_or_fails_readably(data, kind)

    check()


@pytest.mark.parametrize("kind", FORMATS)
def test_damaged_real_files_never_crash_a_parser(kind):
    @FUZZ
    @given(data=mutated(kind))
    def check(data: bytes) -> None:
        assert_parses_or_fails_readably(data, kind)

    check()


# --- Through the ingestion service and the command ------------------------------------------------
def damaged_files(folder: Path) -> list[Path]:
    """Five damaged copies of every format, the same on every run: random bytes, the first
    half, bit flips all over, a spliced-in run of noise, and (zip formats) the main part
    truncated inside a valid archive; each drawn by hypothesis from a fixed seed."""
    from hypothesis import find

    files = []
    for kind in FORMATS:
        variants = [b"\x89\xfe\x00" + bytes(range(256)) * 3]
        data = sample(kind)
        variants.append(data[: len(data) // 2])
        flipped = bytearray(data)
        for position in range(7, len(flipped), max(1, len(flipped) // 40)):
            flipped[position] ^= 0x5A
        variants.append(bytes(flipped))
        middle = len(data) // 3
        variants.append(data[:middle] + bytes(range(200, 256)) * 4 + data[middle + 64 :])
        if kind in ZIP_FORMATS:
            variants.append(
                find(
                    mutated(kind),
                    lambda candidate: candidate[:2] == b"PK",
                    settings=settings(derandomize=True, database=None),
                )
            )
        for number, content in enumerate(variants):
            path = folder / f"damaged-{number}.{kind}"
            path.write_bytes(content)
            files.append(path)
    return files


def assert_database_consistent() -> None:
    assert not Chunk.objects.exclude(document__status=Document.Status.READY).exists()
    assert not Chunk.objects.filter(embeddings__isnull=True).exists()
    assert Embedding.objects.count() == Chunk.objects.count()
    for document in Document.objects.filter(status=Document.Status.READY):
        assert document.chunks.exists(), document.source


@pytest.mark.django_db
def test_ingest_command_survives_damaged_files_and_keeps_the_good_ones(tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    damaged = damaged_files(folder)
    good = folder / "handbook.md"
    good.write_text(documents.MARKDOWN, encoding="utf-8")
    good_text = folder / "cafe-rules.txt"
    good_text.write_bytes(documents.latin1_text_bytes())
    output = io.StringIO()

    with pytest.raises(CommandError, match="file\\(s\\) failed") as error:  # exit status 1
        call_command("ingest", str(folder), stdout=output)
    assert error.value.returncode == 1

    assert Document.objects.count() == len(damaged) + 2
    for path in (good, good_text):
        document = Document.objects.get(source=str(path.resolve()))
        assert document.status == Document.Status.READY and document.chunks.exists()
    failed = Document.objects.filter(status=Document.Status.FAILED)
    assert failed.count() >= len(damaged) // 2  # most damaged files cannot be read
    for document in failed:
        assert_readable(document.error)
    assert_database_consistent()
    assert f"{failed.count()} failed" in output.getvalue()


@pytest.mark.django_db
def test_a_parser_crash_is_recorded_as_a_readable_failure(tmp_path, monkeypatch):
    """A parser raising something other than DocumentParseError (a library bug) fails that file
    with a readable error, recorded on the document; the other files go on."""
    from knowledge import parsers
    from tests.support import hostile

    # Module-level: the parse runs in a child (knowledge/parsers/isolated.py), which is given
    # the parser by name.
    monkeypatch.setitem(parsers.PARSERS, ".html", hostile.parse_crashing)
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "broken.html").write_text(documents.HTML, encoding="utf-8")
    (folder / "handbook.md").write_text(documents.MARKDOWN, encoding="utf-8")

    with pytest.raises(CommandError):
        call_command("ingest", str(folder), stdout=io.StringIO())

    broken = Document.objects.get(source=str((folder / "broken.html").resolve()))
    assert broken.status == Document.Status.FAILED
    assert_readable(broken.error)
    assert "/srv/sourced" not in broken.error and "broken.html" in broken.error
    assert Document.objects.get(title__isnull=False, source__endswith="handbook.md").chunks.exists()
    assert_database_consistent()
