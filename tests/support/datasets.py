"""A tiny labelled dataset (the `../shared/eval` format) for the evaluate and bench commands."""

from __future__ import annotations

from django.db import connection

DOCUMENTS = [
    {
        "id": "Lighthouses",
        "title": "Lighthouses",
        "format": "markdown",
        "text": "# Lighthouses\n\n"
        "The Eddystone Lighthouse stands on rocks fourteen kilometres south of Plymouth. "
        "The present tower was designed by James Douglass and lit in 1882.\n\n"
        "A lighthouse keeper trimmed the wicks and wound the clockwork every few hours. "
        "Most lighthouses in Britain were automated by the end of the twentieth century.\n\n"
        "The Fresnel lens, invented by Augustin-Jean Fresnel in 1822, made the beam visible "
        "from much further away than mirrors could.",
    },
    {
        "id": "Bees",
        "title": "Honey bees",
        "format": "markdown",
        "text": "# Honey bees\n\n"
        "A honey bee colony has one queen, thousands of female workers and, in summer, a few "
        "hundred male drones.\n\n"
        "Worker bees communicate the direction of flowers with the waggle dance, first "
        "described by Karl von Frisch.\n\n"
        "Honey is made from nectar that the bees evaporate in the comb until it holds less "
        "than a fifth water.",
    },
]
QUESTIONS = [
    {
        "id": "q1",
        "question": "Who designed the present Eddystone Lighthouse tower?",
        "kind": "answerable",
        "expect": "answer",
        "document": "Lighthouses",
        "answers": ["James Douglass"],
    },
    {
        "id": "q2",
        "question": "Who first described the waggle dance of bees?",
        "kind": "answerable",
        "expect": "answer",
        "document": "Bees",
        "answers": ["Karl von Frisch"],
    },
    {
        "id": "q3",
        "question": "What is the boiling point of liquid nitrogen at sea level?",
        "kind": "off_kb",
        "expect": "refusal",
        "document": None,
    },
]


def databases() -> set[str]:
    """Names of the databases on the server (to prove throwaway ones are dropped)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT datname FROM pg_database")
        return {row[0] for row in cursor.fetchall()}
