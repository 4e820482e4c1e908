"""Sources beyond folders: web sites and WebDAV shares, mirrored with the folder sync's
semantics (knowledge/sources/services.py;
docs/decisions/0160-sources-sites-and-webdav-shares.md)."""
