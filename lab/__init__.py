"""Measurement tooling: `manage.py evaluate` (answer quality) and `manage.py bench` (speed).

The product apps (`chat`, `knowledge`) never import this package; it imports them.
"""
