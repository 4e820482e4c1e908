"""What the tests share: builders of knowledge bases and stored exchanges, sample documents,
and the servers some tests run (daphne, redis-server, an OpenAI-protocol model, Chromium).

Fixtures stay in the conftests, which build them from here; tests import from here, never
from a conftest.
"""
