"""OCR speed and word recall on the scanned set: each scan parsed (`document_parse`, so with
the product's OCR), the words of each original page counted in the OCR text of the same page.
`plain` reads the pages without cleaning and straightening them first (greyscale only).

    .venv/bin/python lab/datasets/scanned/measure.py prepared
    .venv/bin/python lab/datasets/scanned/measure.py plain
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+(?:[.,:][0-9]+)*", text.lower())


def main(variant: str) -> None:
    import django

    django.setup()
    from PIL import ImageOps
    from pypdf import PdfReader

    from knowledge.parsers import document_parse, ocr

    if variant == "plain":

        def greyscale_only(image):
            image = ImageOps.exif_transpose(image)
            return image if image.mode == "L" else image.convert("L")

        ocr.image_prepare = greyscale_only
    pages_read = found = expected = 0
    seconds = 0.0
    for document in json.loads((HERE / "scanned.json").read_text())["documents"]:
        path = HERE / document["file"]
        truth = [p.extract_text() for p in PdfReader(HERE / "text" / f"{document['id']}.pdf").pages]
        started = time.monotonic()
        parsed = document_parse(data=path.read_bytes(), name=path.name)
        elapsed = time.monotonic() - started
        record = parsed.metadata["ocr"]
        pages_read += len(record["pages"])
        seconds += elapsed
        for number, text in enumerate(truth, start=1):
            read = " ".join(block.text for block in parsed.blocks if block.page == number)
            got, want = Counter(words(read)), Counter(words(text))
            found += sum((got & want).values())
            expected += sum(want.values())
        print(document["id"], len(record["pages"]), f"{elapsed:.1f} s", record["confidence"])
    print(
        f"{variant}: {pages_read} pages in {seconds:.1f} s = {pages_read / seconds:.2f} pages/s; "
        f"word recall {found}/{expected} = {found / expected:.1%}"
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "prepared")
