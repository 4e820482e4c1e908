"""The OpenAPI schema is the API's contract: schemathesis (every check, every phase) runs against
the live `/api/schema/` of a real daphne on loopback, authenticated as a staff user with a token,
over a small knowledge base, and finds nothing the server does that the schema does not say.

The server of this test raises the chat rate limit of its user (CHAT_RATE_LIMIT=100000/m) and
turns the flood rule off (CHAT_FLOOD_MIN_INTERVAL=0): schemathesis asks hundreds of questions a
minute, and the limits have tests of their own (tests/chat/limits/test_ratelimit.py).

Every status a schema-valid request gets is one schemathesis expects by default: what the schema
cannot say (an id naming no answer, no document) is 404, and an embedding may not be all zero,
which the schema does say (docs/decisions/0105-schema-valid-requests-accepted.md). Three
exceptions are added to its list, each documented on its operation: 422 from
GET /api/conversations for an opaque cursor the server did not give, from POST /api/files
(a file of a type that is not read, an empty file) and from POST /v1/chat/completions (the
last message is not the user's question).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection
from rest_framework.authtoken.models import Token

from chat.models import Conversation, Message
from tests.support.knowledge_base import EXPENSES_TEXTS, LEAVE_TEXTS, document_create
from tests.support.live_server import daphne_server, database_url_of
from tests.support.personal import personal_file_create

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SEED = 20261122
MAX_EXAMPLES = 15  # per operation and phase: about a minute in all on a busy 2-core machine
SERVER_ENV = {"CHAT_RATE_LIMIT": "100000/m", "CHAT_FLOOD_MIN_INTERVAL": "0"}

# Schemathesis' default for schema-valid requests, and 422 (GET /api/conversations only).
ACCEPTED = '["2xx", "3xx", "401", "403", "404", "409", "422", "429", "5xx"]'
CONFIG = """\
[[operations]]
include-operation-id = "message_feedback"
parameters = {{ message_id = "{answer_id}" }}

[[operations]]
include-operation-id = "conversations_list"
checks.positive_data_acceptance.expected-statuses = {accepted}

# Generated uploads are mostly of a type that is not read, for conversations that do not exist
# (422 and 404, both documented): its "mostly rejected" and "missing test data" warnings say
# nothing about the schema; its failures still fail the run.
[[operations]]
include-operation-id = "files_upload"
checks.positive_data_acceptance.expected-statuses = {accepted}
warnings = false

# A schema-valid completion whose last message is not the user's question is 422 (documented;
# OpenAPI 3.0 cannot say "the last item's role"): most generated ones are (four roles in five),
# so its "mostly rejected" warning says nothing about the schema; its failures still fail.
[[operations]]
include-operation-id = "v1_chat_completions"
checks.positive_data_acceptance.expected-statuses = {accepted}
warnings = false

[[operations]]
include-operation-id-regex = "^files_(get|delete)$"
parameters = {{ file_id = "{file_id}" }}

[[operations]]
include-operation-id-regex = "^conversation_(get|rename|messages)$"
parameters = {{ conversation_id = "{conversation_id}" }}
"""


def run_schemathesis(base_url: str, token: str, config: Path) -> subprocess.CompletedProcess:
    """The `st` command, run in the config's folder (where it keeps its cache)."""
    executable = Path(sys.executable).with_name("st")
    return subprocess.run(
        [
            str(executable),
            "--config-file",
            str(config),
            "run",
            f"{base_url}/api/schema/?format=json",
            "--checks",
            "all",
            "--header",
            f"Authorization: Token {token}",
            "--seed",
            str(SEED),
            "--max-examples",
            str(MAX_EXAMPLES),
            "--workers",
            "1",
            "--request-timeout",
            "60",
            "--no-color",
            "--output-truncate",
            "true",
        ],  # fmt: skip
        cwd=config.parent,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_schemathesis_finds_no_failure_against_the_live_schema(django_user_model, tmp_path):
    document_create(title="Staff handbook", texts=LEAVE_TEXTS)
    document_create(title="Expenses policy", texts=EXPENSES_TEXTS)
    staff = django_user_model.objects.create_user(username="contract", is_staff=True)
    token = Token.objects.create(user=staff).key
    conversation = Conversation.objects.create(owner=staff, title="Annual leave")
    question = Message.objects.create(
        conversation=conversation, role=Message.Role.USER, content="How much annual leave?"
    )
    answer = Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        content="Full-time employees receive 25 days of paid annual leave. [1]",
        reply_to=question,
    )
    config = tmp_path / "schemathesis.toml"
    config.write_text(
        CONFIG.format(
            accepted=ACCEPTED,
            answer_id=answer.pk,
            conversation_id=conversation.pk,
            file_id=personal_file_create(staff, title="offer.md", texts=LEAVE_TEXTS).pk,
        )
    )

    with daphne_server(database_url_of(connection.settings_dict), env=SERVER_ENV) as url:
        result = run_schemathesis(url, token, config)

    output = result.stdout + result.stderr
    print(output)  # the run's summary (cases generated, phases) in the test's output
    assert result.returncode == 0, output
    assert "15 selected / 15 total" in output  # every operation was tested (3 of them /v1)
    assert "No issues found" in output, output
