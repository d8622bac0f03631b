"""The life of a registry's in-memory index (search/index.py `SearchIndex`): opened from a snapshot file or built
from the store, kept up to date a change at a time, compacted, saved for the next process, built again when the
index's model changes.

- **open**: the newest saved snapshot of this registry and model whose generation the store passed through (its
  generation token matches) is mapped, then the changes since are applied; without one the index is built from the
  store and saved (registries of at least `SearchConfig.save_snapshots_from` tools).
- **follow**: when the store's generation moves, only the tools written since are read: their old positions become
  tombstones and their new versions are appended (`SearchIndex.changed`), the small-talk bank's nearest tools are
  updated without a scan (search/calibrate.py).
- **compact**: once appended tools pass COMPACT_SHARE of the registry (at least COMPACT_MIN) or tombstones pass
  TOMBSTONE_SHARE, the segments are folded into one (`SearchIndex.compacted`) and the result saved.
- **model migration**: a switch of the index's model (`toolrag index rebuild`) starts over with the new model.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from toolrag.embed.base import Embedder
from toolrag.model import Tool
from toolrag.search.ann import GRAPH_FILE, VectorGraph
from toolrag.search.calibrate import nearest_tools, updated_neighbours
from toolrag.search.config import SearchConfig
from toolrag.search.index import PreparedTool, SearchIndex, prepare, texts_by_hash
from toolrag.search.lexical import FloatArray
from toolrag.snapshot import files
from toolrag.snapshot.embedding import IndexEmbeddings
from toolrag.snapshot.fixed import GroupDescriptionVectors, stored_bank_requests
from toolrag.store.base import IndexModel, Store, Vector

log = logging.getLogger("toolrag.snapshot")

COMPACT_MIN = 1024
PREPARE_CHUNK = 5000
GRAPH_DELAY_SECONDS = 5.0
COMPACT_SHARE = 0.05
TOMBSTONE_SHARE = 0.10

ModelOf = Callable[[], tuple[IndexModel, Embedder]]
GroupVectors = Callable[[IndexModel], dict[str, Vector]]
BankRequests = Callable[[Embedder], FloatArray]


class Snapshots:
    """The current `SearchIndex` of one registry in this process; thread-safe."""

    def __init__(
        self,
        store: Store,
        model: ModelOf,
        group_vectors: GroupVectors,
        bank: BankRequests | None,
        save_from: int | None,
        graph_from: int | None = None,
        prepare: Callable[[SearchIndex], None] | None = None,
    ) -> None:
        """`model` gives the index's model and the embedder for it; `group_vectors` the described groups' vectors;
        `bank` the small-talk bank embedded as requests (None: the registry searches without vectors); from
        `graph_from` tools on, an approximate index is built for the dense scan (search/ann.py). `prepare` is
        given each new index as it becomes the current one (to start what searches of it will need)."""
        self.store = store
        self._model = model
        self._group_vectors = group_vectors
        self._bank = bank
        self._save_from = save_from
        self._graph_from = graph_from
        self._prepare = prepare
        self._index: SearchIndex | None = None
        self._model_id: str | None = None
        self._lock = threading.Lock()

    @classmethod
    def of(
        cls, embeddings: IndexEmbeddings, config: SearchConfig, prepare: Callable[[SearchIndex], None] | None = None
    ) -> Snapshots:
        """The snapshots of a registry searched with `config`, on the index and model of `embeddings`."""
        store = embeddings.store
        bank = stored_bank_requests(store) if config.mode != "lexical" else None
        groups = GroupDescriptionVectors(store, lambda: embeddings.embedder)
        return cls(
            store,
            embeddings.snapshot_model,
            groups,
            bank,
            config.save_snapshots_from,
            config.ann_min_tools,
            prepare=prepare,
        )

    def current(self) -> SearchIndex:
        """The index of the store's current generation."""
        generation = self.store.generation()
        index = self._index
        if index is not None and index.generation == generation:
            return index
        with self._lock:
            index = self._index
            if index is not None and index.generation == generation:
                return index
            self._index = index = self._follow(index, generation)
        if self._prepare is not None:
            self._prepare(index)
        return index

    def reset(self) -> None:
        """Forget the index: the next search opens it again (vectors were saved without a generation move)."""
        with self._lock:
            self._index = None

    def _follow(self, index: SearchIndex | None, generation: int) -> SearchIndex:
        model, embedder = self._model()
        if index is None or self._model_id != model.model_id:
            index = self._open(model, embedder, generation)
            self._model_id = model.model_id
        if index.generation == generation:
            return index
        return self._apply(index, generation, model, embedder)

    # -- open -----------------------------------------------------------------------------------------------------

    def _open(self, model: IndexModel, embedder: Embedder, generation: int) -> SearchIndex:
        loaded = self._load(model, embedder, generation)
        if loaded is not None:
            return loaded
        index = self._build(model, embedder, generation)
        self._grow_graph(index, self._save(index, model))
        return index

    def _load(self, model: IndexModel, embedder: Embedder, generation: int) -> SearchIndex | None:
        if self._save_from is None:
            return None
        registry = _registry_of(self.store)
        try:
            saved_ones = files.candidates(self._folder(), registry, model.model_id, generation)
        except OSError as error:  # no cache folder, or one this user cannot read: build from the store
            log.warning("snapshot not used, building from the store instead: %s", error)
            return None
        for saved, token, folder in saved_ones:
            if self.store.generation_token(saved) != token:
                continue  # a state this registry never had (a copy of its file that diverged), or too old to tell
            try:
                index = files.load(folder, files.SnapshotKey(registry, model.model_id, saved, token), embedder)
            except files.SnapshotFileError as error:
                log.warning("snapshot not used, building from the store instead: %s", error)
                shutil.rmtree(folder, ignore_errors=True)  # this user's (checked): the next save replaces it
                continue
            groups = index.groups
            if groups is not None:
                vectors = self._group_vectors(model)
                groups = groups.with_descriptions(groups.names, groups.of_tool, vectors, model.dimension)
            index = replace(index, groups=groups)
            self._map_or_grow_graph(index, folder)
            return index
        return None

    def _build(self, model: IndexModel, embedder: Embedder, generation: int) -> SearchIndex:
        tools = self.store.tools()
        index = SearchIndex.build(
            generation,
            self._prepared(tools, model),
            model.dimension,
            embedder,
            self._group_vectors(model),
        )
        if self._bank is not None and index.size:
            index = replace(index, neighbours=nearest_tools(index, self._bank(embedder)))
        return index

    def _prepared(self, tools: Sequence[Tool], model: IndexModel) -> list[PreparedTool]:
        """The active tools' tokens and vector rows, their vectors read PREPARE_CHUNK tools at a time: the vectors
        as read are a copy of what the index keeps, so reading them all at once would double its peak memory."""
        active = sorted((t for t in tools if t.active), key=lambda t: t.name)
        prepared: list[PreparedTool] = []
        for start in range(0, len(active), PREPARE_CHUNK):
            chunk = active[start : start + PREPARE_CHUNK]
            vectors = self.store.vectors(model.model_id, texts_by_hash(chunk))
            prepared.extend(prepare(tool, vectors) for tool in chunk)
        return prepared

    # -- follow ---------------------------------------------------------------------------------------------------

    def _apply(self, index: SearchIndex, generation: int, model: IndexModel, embedder: Embedder) -> SearchIndex:
        changed = self.store.changed_since(index.generation)
        gone = [p for p in (index.position_of(tool.name) for tool in changed) if p is not None]
        updated = index.changed(generation, changed, self._prepared(changed, model), self._group_vectors(model))
        if index.neighbours is not None and self._bank is not None:
            bank = self._bank(embedder)
            neighbours = updated_neighbours(index.neighbours, updated, gone, index.size, bank)
            updated = replace(updated, neighbours=neighbours)
        updated.derived.follow(index.derived)  # same lineage: what carries over to the following snapshot
        if self._needs_compaction(updated):
            updated = updated.compacted()
            self._grow_graph(updated, self._save(updated, model))
        return updated

    @staticmethod
    def _needs_compaction(index: SearchIndex) -> bool:
        appended = index.appended_count() > max(COMPACT_MIN, COMPACT_SHARE * index.size)
        return appended or index.tombstones() > max(COMPACT_MIN, TOMBSTONE_SHARE * index.size)

    # -- save -----------------------------------------------------------------------------------------------------

    def _save(self, index: SearchIndex, model: IndexModel) -> Path | None:
        """The folder the snapshot was saved in (None: not saved)."""
        if self._save_from is None or index.live_count < self._save_from:
            return None
        token = self.store.generation_token(index.generation)
        if token is None:
            return None
        key = files.SnapshotKey(_registry_of(self.store), model.model_id, index.generation, token)
        try:
            return files.save(self._folder(), key, index)
        except OSError as error:  # a read-only or full cache folder: the next process builds again
            log.warning("snapshot not saved (%s): the next process builds its index from the store", error)
            return None

    # -- the approximate index ------------------------------------------------------------------------------------

    def _wants_graph(self, index: SearchIndex) -> bool:
        return self._graph_from is not None and index.live_count >= self._graph_from and index.vectors.count > 0

    def _map_or_grow_graph(self, index: SearchIndex, folder: Path) -> None:
        if not self._wants_graph(index):
            return
        saved = folder / GRAPH_FILE
        if saved.exists():
            try:
                index.graph.graph = VectorGraph.mapped(saved, len(index.vectors.blocks[0]))
                return
            except (ValueError, RuntimeError, OSError) as error:
                log.warning("approximate index not used, building it again: %s", error)
        self._grow_graph(index, folder)

    def _grow_graph(self, index: SearchIndex, folder: Path | None) -> None:
        """Build the graph of the index's base rows in the background (searches scan exactly meanwhile), then save
        it beside the snapshot."""
        if not self._wants_graph(index):
            return
        slot, base = index.graph, index.vectors.blocks[0]

        def build() -> None:
            # Later, not at once: a short-lived process (one CLI search) exits before it, and the first
            # searches of a long-lived one do not share the cores with it.
            time.sleep(GRAPH_DELAY_SECONDS)
            started = time.perf_counter()
            try:
                graph = VectorGraph.build(base)
            except (ImportError, RuntimeError, ValueError) as error:
                log.warning("no approximate index (%s): every search scans the vectors exactly", error)
                return
            slot.graph = graph
            log.info("approximate index of %d vectors built in %.1f s", len(base), time.perf_counter() - started)
            if folder is not None:
                try:
                    graph.save(folder)
                except (OSError, RuntimeError) as error:
                    log.warning("approximate index not saved (%s): the next process builds it again", error)

        threading.Thread(target=build, name="toolrag-graph", daemon=True).start()

    def _folder(self) -> Path:
        return files.snapshots_root()


def _registry_of(store: Store) -> str:
    """The store's location: a SQLite file's absolute path, a PostgreSQL URL (without password) and schema."""
    path = getattr(store, "path", None)
    return f"sqlite:{Path(path).resolve()}" if path is not None else repr(store)
