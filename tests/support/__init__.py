"""What the tests share, defined once. Fixtures stay in the conftests, which build them from
here; tests import from here, never from a conftest or another test module.

- `knowledge_base`: documents, chunks and embeddings written directly; vectors at a chosen
  cosine; the leave, expenses and security texts.
- `answers`: running the answering pipeline (`collect`), the checks every answer must pass.
- `conversations`: a stored question and answer with citations.
- `clients`: the conversation WebSocket's fragments and the SSE frames of /api/chat.
- `ratelimit`: many requests of one user at the same moment.
- `documents`, `spreadsheets`: real files of every supported format.
- `datasets`: the tiny labelled dataset of the lab tests.
- `live_server`, `redis_server`, `openai_server`: daphne, redis-server and an OpenAI-protocol
  model on free loopback ports.
- `browser`: Debian's Chromium for Playwright, and what a test does in a page.
"""
