"""`manage.py embedding_export`: export the packaged embedding model to ONNX (once)."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandParser

from knowledge import embedding


class Command(BaseCommand):
    help = (
        "Export the packaged all-MiniLM-L6-v2 to ONNX (fp32 and int8) under "
        "EMBEDDING_ONNX_DIR, from the local weights (nothing is downloaded). Does nothing when "
        "the files are there, unless --force. `make setup` runs it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--force", action="store_true", help="Export again even if the files exist."
        )

    def handle(self, *args, **options) -> None:
        fp32, int8 = embedding.onnx_paths()
        if options["force"]:
            fp32.unlink(missing_ok=True)
            int8.unlink(missing_ok=True)
        if fp32.exists() and int8.exists():
            self.stdout.write(f"ONNX model already exported in {fp32.parent}.")
            return
        started = time.perf_counter()
        embedding.onnx_files_ensure()
        self.stdout.write(
            f"Exported the embedding model to {fp32.parent} in "
            f"{time.perf_counter() - started:.1f} s "
            f"(fp32 {fp32.stat().st_size / 1e6:.1f} MB, int8 {int8.stat().st_size / 1e6:.1f} MB)."
        )
