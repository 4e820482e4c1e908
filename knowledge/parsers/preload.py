"""Imported once by the fork server that forks the parsing children
(knowledge/parsers/isolated.py): the parsers and the libraries they import when first used, so
that each child starts with them in memory (shared with the server until written) instead of
importing them again. Nothing else: not Django's apps, not the embedding model, no database."""

from __future__ import annotations

import bs4  # noqa: F401
import charset_normalizer  # noqa: F401
import docx  # noqa: F401
import lxml.etree  # noqa: F401
import markdown_it  # noqa: F401
import numpy  # noqa: F401
import openpyxl  # noqa: F401
import pptx  # noqa: F401
import pypdf  # noqa: F401
import pypdfium2  # noqa: F401
from PIL import Image, ImageFilter, ImageOps  # noqa: F401

import knowledge.parsers  # noqa: F401
import knowledge.parsers.isolated  # noqa: F401
