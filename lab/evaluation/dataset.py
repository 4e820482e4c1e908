"""The evaluation data format (../shared/eval/README.md): documents + labelled questions."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

FORMAT_EXTENSIONS = {
    "markdown": ".md",
    "md": ".md",
    "text": ".txt",
    "txt": ".txt",
    "plain": ".txt",
    "html": ".html",
}
KINDS = ("answerable", "off_kb", "adversarial")


class DatasetError(ValueError):
    """The file is not a usable evaluation dataset; the message says why."""


@dataclass(frozen=True)
class DatasetDocument:
    """A document given inline (`text` in `format`), or as a file beside the dataset (`path`,
    any format ingestion reads: PDF, DOCX, …)."""

    id: str
    title: str
    format: str
    text: str
    path: Path | None = None

    @property
    def file_name(self) -> str:
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", self.id).strip("_") or "document"
        if self.path is not None:
            return stem + self.path.suffix.lower()
        return stem + FORMAT_EXTENSIONS[self.format]

    def write_to(self, folder: Path) -> None:
        """Write the document as a file into `folder`, as a user would hand it to ingestion."""
        if self.path is not None:
            (folder / self.file_name).write_bytes(self.path.read_bytes())
        else:
            (folder / self.file_name).write_text(self.text, encoding="utf-8")


@dataclass(frozen=True)
class DatasetQuestion:
    id: str
    question: str
    expect: str  # "answer" | "refusal"
    kind: str
    document: str | None
    answers: tuple[str, ...]
    # The id of the question this one follows in the same conversation (asked right after it).
    follows: str | None = None


@dataclass(frozen=True)
class Dataset:
    name: str
    documents: list[DatasetDocument]
    questions: list[DatasetQuestion]


def dataset_load(path: Path) -> Dataset:
    """Read and validate a dataset file; DatasetError with a readable message if it's wrong."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise DatasetError(f"Cannot read {path}: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise DatasetError("The dataset must be a JSON object with documents and questions.")
    documents_raw, questions_raw = raw.get("documents"), raw.get("questions")
    if not isinstance(documents_raw, list) or not isinstance(questions_raw, list):
        raise DatasetError("The dataset needs a 'documents' list and a 'questions' list.")

    documents = []
    for i, item in enumerate(documents_raw):
        if isinstance(item, dict) and isinstance(item.get("file"), str):
            documents.append(_file_document(i, item, Path(path).parent))
            continue
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise DatasetError(f"documents[{i}] needs a 'text' string or a 'file' path.")
        fmt = str(item.get("format", "markdown")).lower()
        if fmt not in FORMAT_EXTENSIONS:
            supported = ", ".join(sorted(FORMAT_EXTENSIONS))
            raise DatasetError(f"documents[{i}] has format {fmt!r}; supported: {supported}.")
        doc_id = str(item.get("id") or item.get("title") or f"document-{i}")
        documents.append(
            DatasetDocument(
                id=doc_id, title=str(item.get("title") or doc_id), format=fmt, text=item["text"]
            )
        )
    names = [d.file_name for d in documents]
    if len(set(names)) != len(names):
        raise DatasetError("Document ids must be unique.")

    questions: list[DatasetQuestion] = []
    for i, item in enumerate(questions_raw):
        if not isinstance(item, dict) or not str(item.get("question", "")).strip():
            raise DatasetError(f"questions[{i}] needs a non-empty 'question'.")
        kind = str(item.get("kind") or "")
        expect = str(item.get("expect") or ("answer" if kind == "answerable" else "refusal"))
        if kind not in KINDS:
            kind = "answerable" if expect == "answer" else "off_kb"
        answers = item.get("answers") or []
        if not isinstance(answers, list):
            raise DatasetError(f"questions[{i}].answers must be a list.")
        if expect == "answer" and not answers:
            raise DatasetError(f"questions[{i}] expects an answer but lists no gold answers.")
        follows = item.get("follows")
        if follows is not None and (not questions or str(follows) != questions[-1].id):
            raise DatasetError(
                f"questions[{i}].follows must name the question just before it "
                f"({questions[-1].id if questions else 'there is none'}), not {follows!r}."
            )
        questions.append(
            DatasetQuestion(
                id=str(item.get("id") or i),
                question=str(item["question"]),
                expect=expect,
                kind=kind,
                document=item.get("document"),
                answers=tuple(str(a) for a in answers),
                follows=None if follows is None else str(follows),
            )
        )
    if not questions:
        raise DatasetError("The dataset has no questions.")
    return Dataset(
        name=str(raw.get("name") or Path(path).stem), documents=documents, questions=questions
    )


def _file_document(i: int, item: dict, folder: Path) -> DatasetDocument:
    """A document given as a file, its path relative to the dataset file."""
    file_path = (folder / item["file"]).resolve()
    if not file_path.is_file():
        raise DatasetError(f"documents[{i}].file {item['file']!r}: no such file ({file_path}).")
    doc_id = str(item.get("id") or file_path.stem)
    return DatasetDocument(
        id=doc_id,
        title=str(item.get("title") or doc_id),
        format=file_path.suffix.lower().lstrip("."),
        text="",
        path=file_path,
    )


def normalise(text: str) -> str:
    """Case- and whitespace-insensitive form used to look for gold answers."""
    return " ".join(text.lower().split())


def contains_gold(text: str, answers: tuple[str, ...]) -> bool:
    haystack = normalise(text)
    return any(normalise(answer) and normalise(answer) in haystack for answer in answers)
