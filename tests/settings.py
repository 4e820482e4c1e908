"""The settings the test suite runs with: the project's own (`config.settings`), with a fast
password hasher.

Django's default hasher (PBKDF2, a million iterations) is built to be slow; the suite creates
about 750 users and signs in hundreds of times, so it would spend minutes hashing. MD5 is
fine for throwaway test passwords and never used outside the tests. The servers the tests
start (daphne, the ingestion worker: `tests.support.live_server`) are given these settings
too, so a password set by a test is checked by the same hasher."""

from config.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
