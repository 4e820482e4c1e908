"""Where a server's CPU goes per question, from a sampling profile: py-spy's collapsed stacks
(`py-spy record --format raw`) of the web process while `bench` asks its questions
(docs/decisions/0152-statements-written-out.md shows the commands and the figures).

    python -m lab.benchmark.stacks PROFILE.raw --rate 200 --questions 330 \\
        "chunks_search (" "final_html (" "exchange_store ("

prints, for each function named (a substring of the frame, e.g. `chunks_search (`), the
milliseconds per question its stacks were on the CPU, and apart from those the time they
waited: on PostgreSQL (`Connection.wait`), the embedding model (ONNX Runtime's `Session.run`,
which runs without the interpreter lock), or an idle event loop or thread pool. A stack counts
once for every function it holds, so nested functions overlap.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

# Leaf frames that are waiting, not computing in Python.
WAITING = (
    "Connection.wait (",
    "EpollSelector.select",
    "Condition.wait",
    "Session.run (",
    "_worker (concurrent",
    "Event.wait",
    "untilConcludes",
)
_LINE = re.compile(r":\d+\)")


def stacks_read(lines: Iterable[str]) -> list[tuple[list[str], int]]:
    """(frames, samples) of each line of py-spy's raw format (`frame;frame;… count`)."""
    stacks = []
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if stack and count.isdigit():
            stacks.append(([_LINE.sub(")", frame) for frame in stack.split(";")], int(count)))
    return stacks


def per_question(
    stacks: Sequence[tuple[list[str], int]], names: Sequence[str], *, rate: float, questions: int
) -> dict[str, tuple[float, float]]:
    """{name: (CPU ms, waiting ms) per question} of the stacks holding a frame that contains
    `name`: a sample stands for 1000 / `rate` ms of one thread, shared by the `questions`
    answered while recording."""
    busy: Counter[str] = Counter()
    waiting: Counter[str] = Counter()
    for frames, count in stacks:
        idle = frames[-1].startswith(WAITING)
        for name in names:
            if any(name in frame for frame in frames):
                (waiting if idle else busy)[name] += count
    per_sample = 1000 / rate / questions
    return {name: (busy[name] * per_sample, waiting[name] * per_sample) for name in names}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("profile", type=Path, help="py-spy's raw (collapsed stacks) output")
    parser.add_argument("--rate", type=float, default=100, help="samples a second (py-spy -r)")
    parser.add_argument("--questions", type=int, required=True, help="answered while recording")
    parser.add_argument("names", nargs="+", help="frames to sum, e.g. 'chunks_search ('")
    args = parser.parse_args(argv)
    with args.profile.open() as lines:
        stacks = stacks_read(lines)
    names = ["process ", *args.names]  # the first: every stack of the process
    figures = per_question(stacks, names, rate=args.rate, questions=args.questions)
    print(f"{'frame':48s} {'CPU ms/q':>9s} {'waiting ms/q':>13s}")
    for name, (busy, idle) in figures.items():
        label = "(the whole process)" if name == "process " else name
        print(f"{label:48s} {busy:9.1f} {idle:13.1f}")


if __name__ == "__main__":
    main()
