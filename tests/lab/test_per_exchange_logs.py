"""The measurement commands silence the product's per-exchange log lines while they run, and
only then (lab/evaluation/logs.py)."""

from __future__ import annotations

import logging

from lab.evaluation.logs import PER_EXCHANGE_LOGGERS, per_exchange_logs_quiet


def test_the_per_exchange_lines_are_silenced_in_the_block_and_restored_after(caplog):
    caplog.set_level(logging.INFO)
    before = {name: logging.getLogger(name).level for name in PER_EXCHANGE_LOGGERS}

    with per_exchange_logs_quiet(keep=("sourced.exchange",)):
        logging.getLogger("sourced.retrieval").info('{"event": "chat.retrieval"}')
        logging.getLogger("sourced.exchange").info('{"event": "chat.exchange"}')
    logging.getLogger("sourced.retrieval").info('{"event": "after"}')

    messages = [(r.name, r.getMessage()) for r in caplog.records]
    assert ("sourced.retrieval", '{"event": "chat.retrieval"}') not in messages
    assert ("sourced.exchange", '{"event": "chat.exchange"}') in messages
    assert ("sourced.retrieval", '{"event": "after"}') in messages
    assert {name: logging.getLogger(name).level for name in PER_EXCHANGE_LOGGERS} == before
