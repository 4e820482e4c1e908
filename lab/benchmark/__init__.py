"""`manage.py bench`: speed figures of the real code on this machine, in a throwaway database.

- `corpus`: ingestion vs. the embedding model alone, the synthetic large corpus, retrieval.
- `conversation`: the 200-message conversation whose load time is measured.
- `server`: a daphne subprocess serving the throwaway database on 127.0.0.1.
- `clients`: WebSocket and SSE clients, and the conversation loads, against that server.
- `stats`: percentiles; `run`: the whole run in order; `report`: the printed table.
"""
