"""The index's embedding model and the vectors of the store's texts: which model the index is on, which texts have no
vector for it, re-embedding them (`embed_missing`) or every text with another model (`rebuild`, a model migration).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from toolrag.embed import embedder_name_for, make_embedder
from toolrag.embed.base import Embedder, ProgressCallback, embed_in_batches
from toolrag.errors import ModelMismatchError
from toolrag.model import Tool
from toolrag.search.index import text_hash, texts_by_hash
from toolrag.search.text import embedded_texts
from toolrag.store.base import IndexModel, Store, model_mismatch_message


class IndexEmbeddings:
    """One registry's embedder over its store's vectors. An embedder given as "auto" follows the model the index
    was built with, also when a migration switches it; `on_switch` is told of the new embedder."""

    def __init__(self, store: Store, embedder: Embedder | str, on_switch: Callable[[Embedder], None]) -> None:
        self.store = store
        self.follows_model = embedder == "auto"
        if isinstance(embedder, str):
            embedder = make_embedder(self._recorded_embedder_name() if self.follows_model else embedder)
        self.embedder = embedder
        self._on_switch = on_switch

    def index_model(self) -> IndexModel:
        """The model the index is on (ModelMismatchError when it is not this embedder's and this one does not
        follow the index)."""
        requested = IndexModel(self.embedder.model_id, self.embedder.dimension)
        recorded = self.store.index_model()
        if recorded is not None and recorded != requested:
            if not self.follows_model:
                raise ModelMismatchError(model_mismatch_message(recorded, requested))
            self.embedder = make_embedder(embedder_name_for(recorded.model_id))
            self._on_switch(self.embedder)
            return recorded
        return requested

    def snapshot_model(self) -> tuple[IndexModel, Embedder]:
        """The index's model and the embedder for it (snapshot/ `ModelOf`)."""
        model = self.index_model()
        return model, self.embedder

    def missing(self, texts: dict[str, str], model_id: str) -> list[str]:
        """Hashes of the texts the store holds no vector of `model_id` for."""
        known = self.store.vectors(model_id, texts)
        return [key for key in texts if key not in known]

    def texts_to_embed(self, tools: Sequence[Tool]) -> int:
        return len(self.missing(texts_by_hash(tools), self.index_model().model_id))

    def texts_to_rebuild(self) -> int:
        return len(self.missing(texts_by_hash(self.store.tools(include_inactive=True)), self.embedder.model_id))

    def tools_without_embeddings(self) -> list[str]:
        model = self.index_model()
        tools = self.store.tools()
        known = self.store.vectors(model.model_id, texts_by_hash(tools))
        return [t.name for t in tools if any(text_hash(x) not in known for x in embedded_texts(t))]

    def embed_missing(self, progress: ProgressCallback | None = None) -> int:
        """Embed the texts that have no vector for the index's model; returns how many. Saving vectors moves no
        generation: the caller opens its snapshot anew."""
        model = self.index_model()
        texts = texts_by_hash(self.store.tools(include_inactive=True))
        missing = self.missing(texts, model.model_id)
        vectors = embed_in_batches(self.embedder, [texts[key] for key in missing], progress=progress)
        self.store.save_vectors(model, dict(zip(missing, vectors, strict=True)))
        return len(missing)

    def rebuild(self, progress: ProgressCallback | None = None, batch_size: int = 256) -> int:
        """Embed every tool with this embedder and switch the index to it; returns texts embedded.

        Vectors are saved a batch at a time beside the old model's, which keeps serving searches until the
        switch; an interrupted rebuild resumes where it stopped when run again. Tools written meanwhile (an import
        in another process) are embedded too before the switch, which happens only when none is missing."""
        model = IndexModel(self.embedder.model_id, self.embedder.dimension)
        embedded = 0
        while True:  # until no tool was written between the last look and the switch
            generation = self.store.generation()
            texts = texts_by_hash(self.store.tools(include_inactive=True))
            missing = self.missing(texts, model.model_id)
            for start in range(0, len(missing), batch_size):
                keys = missing[start : start + batch_size]
                vectors = self.embedder.embed_documents([texts[key] for key in keys])
                self.store.save_vectors(model, dict(zip(keys, vectors, strict=True)))
                if progress is not None:
                    progress(len(keys))
            embedded += len(missing)
            if self.store.switch_model(model, if_generation=generation):
                return embedded

    def _recorded_embedder_name(self) -> str:
        recorded = self.store.index_model()
        return embedder_name_for(recorded.model_id) if recorded is not None else "default"
