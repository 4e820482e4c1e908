"""The knowledge side of the admin (docs/product.md §9), one module per page family:

- `documents`: upload documents (processed in the background) into a collection,
  enable/disable them, move them between collections, follow their status, re-process them;
- `chunks`: read what ingestion made of a document (never edited by hand);
- `collections`: create and edit collections and their readers;
- `personal_files`: users' personal files and their time to live, for superusers;
- the sources (folders, sites, WebDAV shares): knowledge/sources/admin.py.

Outside superusers, the document and chunk pages show only the documents of the collections
the user may read (knowledge/access.py), so the admin is no way around a collection's readers.

Document text only ever reaches the page through Django's autoescaping (plain strings,
`format_html`); nothing from a document is marked safe.

Importing this package registers every page (Django's admin autodiscovery imports it).
"""

import knowledge.admin.chunks
import knowledge.admin.collections
import knowledge.admin.documents
import knowledge.admin.personal_files
import knowledge.sources.admin  # noqa: F401
