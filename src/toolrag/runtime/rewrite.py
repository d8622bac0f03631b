"""Alternative phrasings of a request from a chat model, for the `rewrite` reformulation step of the search."""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict

from toolrag.runtime.chat import ChatModel
from toolrag.runtime.messages import Message

_LIST_MARKER = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")
logger = logging.getLogger(__name__)


class ChatRewriter:
    """Asks a chat model for a few short rephrasings of a request, once per distinct request."""

    PROMPT = (
        "You help a search engine find software tools. Rewrite the user's request as up to {n} short alternative "
        "phrasings that name the capability needed, in English, one per line, with no numbering and no other text."
    )

    def __init__(self, model: ChatModel, alternatives: int = 3, cache_entries: int = 1024) -> None:
        self.model = model
        self.alternatives = alternatives
        self._cache: OrderedDict[str, list[str]] = OrderedDict()
        self._capacity = cache_entries
        self._lock = threading.Lock()

    def rewrite(self, request: str) -> list[str]:
        key = " ".join(request.lower().split())
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return list(self._cache[key])
        messages = [Message.system(self.PROMPT.format(n=self.alternatives)), Message.user(request)]
        try:
            answer = self.model.complete(messages, []).content
        except Exception as exc:  # a rewrite is optional: the search goes on without it
            logger.warning("request rewrite failed: %s", exc)
            return []
        phrasings = self._parse(answer, request)
        with self._lock:
            self._cache[key] = phrasings
            if len(self._cache) > self._capacity:
                self._cache.popitem(last=False)
        return list(phrasings)

    def _parse(self, answer: str, request: str) -> list[str]:
        lines = (_LIST_MARKER.sub("", line).strip().strip('"') for line in answer.splitlines())
        unique = dict.fromkeys(line for line in lines if line and line.lower() != request.lower())
        return list(unique)[: self.alternatives]
