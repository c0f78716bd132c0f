"""A generation engine that answers from a dict of canned replies, for the model judge's
tests (tests/unit/engine/test_judge.py): what a model would say, without a model.

Each reply is keyed by a text the request's user message holds (the judged output, say);
the first key found answers. Requests finish out of order, a few per poll, as a real
engine's do. It records what it was asked: the conversations, each request's budget, and
the most requests it held at once.
"""

from __future__ import annotations

from collections import deque

from synthfactory.rephrase.engines import Completion


class ScriptedEngine:
    device = "cpu"
    devices = 1

    def __init__(self, replies: dict[str, str], per_poll: int = 2,
                 refuse: str | None = None, finish_reason: str = "stop"):
        self.replies = replies
        self.per_poll = per_poll
        self.refuse = refuse  # a text whose request is refused (as over the window)
        self.finish_reason = finish_reason
        self.rejections: dict[int, str] = {}
        self.conversations: list[list[dict]] = []
        self.budgets: list[int | None] = []
        self.most_in_flight = 0
        self._queue: deque[tuple[int, str]] = deque()

    def reply_for(self, user: str) -> str:
        for key, reply in self.replies.items():
            if key in user:
                return reply
        raise AssertionError(f"no canned reply for a request holding {user[:200]!r}")

    def submit(self, rows, conversations, max_tokens=None, sampling=None) -> list[int]:
        refused = []
        for i, (row, conversation) in enumerate(zip(rows, conversations, strict=True)):
            self.conversations.append(conversation)
            self.budgets.append(None if max_tokens is None else max_tokens[i])
            user = conversation[-1]["content"]
            if self.refuse and self.refuse in user:
                self.rejections[row] = "prompt longer than the context window"
                refused.append(row)
            else:
                self._queue.append((row, self.reply_for(user)))
        self.most_in_flight = max(self.most_in_flight, len(self._queue))
        return refused

    def poll(self) -> list[Completion]:
        batch = [self._queue.popleft() for _ in range(min(self.per_poll, len(self._queue)))]
        batch.reverse()  # out of order
        return [Completion(row, text, 10, len(text.split()), self.finish_reason)
                for row, text in batch]

    def in_flight(self) -> int:
        return len(self._queue)
