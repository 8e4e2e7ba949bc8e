"""StaticEmbedder: the static model distilled from all-MiniLM-L6-v2, read offline from the
``cortexgraph-minilm-static`` package and checked by sha256.

Run with the model package importable (``make test`` installs the ``static`` extra; from a
checkout, put ``models/minilm-static/src`` on ``PYTHONPATH``). The batch-invariance
property compares bytes, not cosines: the embedder's arithmetic is exact or correctly
rounded, so a text's vector cannot depend on its batch, its position or the process.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import shutil
import sys
from pathlib import Path

import cortexgraph_minilm_static  # the 'static' extra, which make test installs
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import cortexgraph as cg
from cortexgraph.embed import Embedder, HashEmbedder
from cortexgraph.embed.static import MODEL_SHA256, StaticEmbedder
from cortexgraph.errors import CortexError, EmbedderError, MissingExtraError, ValidationError
from embed_samples import (
    PARAPHRASES,
    REFUSE_NETWORK,
    SEMANTIC_PARAPHRASES,
    flat,
    pair_cosines,
    run_python,
)

# Words for random sentences: common English, accents, CJK, an emoji, symbols, a number.
WORDS = ["the", "deploy", "failed", "on", "friday", "because", "billing", "service"]
WORDS += ["timeout", "alice", "owns", "api", "argo", "migrations", "naïve", "café"]
WORDS += ["日本語", "🙂", "###", "x-ray", "don't", "3.14", "REST", "Überprüfung"]

# Embeds with the network refused and prints the vectors' bytes.
SUBPROCESS_SCRIPT = REFUSE_NETWORK + (
    "from cortexgraph.embed.static import StaticEmbedder\n"
    "print(StaticEmbedder().embed(%r).tobytes().hex())\n"
)


@pytest.fixture(scope="module")
def static() -> StaticEmbedder:
    """One loaded model for the module's tests."""
    return StaticEmbedder()


def package_copy(tmp_path: Path) -> Path:
    """A copy of the installed model directory, to damage without touching the original."""
    copy = tmp_path / "model"
    shutil.copytree(cortexgraph_minilm_static.model_dir(), copy)
    return copy


# --- the protocol, shapes and validation ----------------------------------------------------


def test_static_embedder_name_shape_and_normalisation(static: StaticEmbedder) -> None:
    """(n, 384) float32 unit rows under the name ``all-MiniLM-L6-v2:static-1``; a text with
    no known word piece (empty, or a symbol the vocabulary lacks) gives a zero row."""
    texts = ["Deploys go through CI", "日本語のテキスト", "x" * 5000 + " deploy", "", "🙂", "  "]
    out = static.embed(texts)
    assert isinstance(static, Embedder)
    assert (static.name, static.dim) == ("all-MiniLM-L6-v2:static-1", 384)
    assert out.shape == (6, 384)
    assert out.dtype == np.float32
    norms = np.linalg.norm(out.astype(np.float64), axis=1)
    np.testing.assert_allclose(norms[:2], 1.0, atol=1e-6)
    assert norms[2:].tolist() == [0.0] * 4  # the deploy after 5,000 characters is not read
    assert static.embed([]).shape == (0, 384)
    assert static.embed(("a", "b")).shape == (2, 384)


def test_only_the_first_512_pieces_of_the_first_3072_characters_are_read(
    static: StaticEmbedder,
) -> None:
    """What follows the first 3,072 characters, or the first 512 word pieces, does not
    change the vector; the same words earlier do."""

    def same(a: str, b: str) -> bool:
        first, second = static.embed([a, b])
        return first.tobytes() == second.tobytes()

    chars = "deploy the billing service " * 113 + "x" * 21  # 3,072 characters, 463 pieces
    assert len(chars) == 3072
    assert same(chars, chars + " cat dog")
    assert not same(chars[:-21], chars[:-21] + " cat dog")
    pieces = "a " * 512  # 512 pieces in 1,024 characters
    assert same(pieces, pieces + "cat dog")
    assert not same(pieces[:-20], pieces[:-20] + "cat dog")


@pytest.mark.parametrize("bad", ["one text", b"bytes", 42, None, ["ok", 3], ["lone \ud800"]])
def test_static_embedder_validates_texts(static: StaticEmbedder, bad: object) -> None:
    """A bare str, bytes, a non-sequence, a non-str item or invalid Unicode is refused with
    a ValidationError naming ``texts``."""
    with pytest.raises(ValidationError) as info:
        static.embed(bad)  # type: ignore[arg-type]
    assert info.value.field == "texts"


@pytest.mark.parametrize("bad", [42, b"/tmp", ["dir"]])
def test_static_embedder_validates_model_dir(bad: object) -> None:
    """``model_dir`` must be None, a str or a path-like."""
    with pytest.raises(ValidationError) as info:
        StaticEmbedder(model_dir=bad)  # type: ignore[arg-type]
    assert info.value.field == "model_dir"


@pytest.mark.parametrize("module", ["tokenizers", "safetensors.numpy", "cortexgraph_minilm_static"])
def test_static_embedder_without_the_extra_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    """Without tokenizers, safetensors or the model package, constructing StaticEmbedder
    raises MissingExtraError (an ImportError too) telling the user to install
    cortexgraph[static], and naming what is missing."""
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError, match=r"pip install 'cortexgraph\[static\]'") as info:
        StaticEmbedder()
    assert info.value.extra == "static"
    assert module in str(info.value)
    assert isinstance(info.value, ImportError)
    assert isinstance(info.value, CortexError)


def test_an_explicit_model_dir_needs_no_model_package(
    monkeypatch: pytest.MonkeyPatch, static: StaticEmbedder
) -> None:
    """With ``model_dir`` given, the model package is not imported; the vectors are the
    same bytes."""
    directory = cortexgraph_minilm_static.model_dir()
    monkeypatch.setitem(sys.modules, "cortexgraph_minilm_static", None)
    embedder = StaticEmbedder(model_dir=str(directory))
    assert repr(embedder) == f"StaticEmbedder(model_dir={str(directory)!r})"
    texts = flat(PARAPHRASES[:2])
    assert embedder.embed(texts).tobytes() == static.embed(texts).tobytes()


# --- the model files: pinned, verified, read offline ---------------------------------------


def test_the_package_records_the_pinned_digests_and_its_files_match() -> None:
    """The package's SHA256 and the embedder's pins agree, and every file in the package
    hashes to its recorded digest (a re-distilled package must come with a new name)."""
    recorded = cortexgraph_minilm_static.SHA256
    assert sorted(recorded) == ["config.json", "model.safetensors", "tokenizer.json"]
    assert {name: recorded[name] for name in MODEL_SHA256} == MODEL_SHA256
    directory = cortexgraph_minilm_static.model_dir()
    for name, digest in recorded.items():
        assert hashlib.sha256((directory / name).read_bytes()).hexdigest() == digest, name


@pytest.mark.parametrize("name", sorted(MODEL_SHA256))
def test_a_damaged_model_file_is_refused(tmp_path: Path, static: StaticEmbedder, name: str) -> None:
    """One flipped byte in a model file is an EmbedderError naming the file and its digest;
    the undamaged copy loads and gives the same bytes (so the copy itself is fine)."""
    copy = package_copy(tmp_path)
    texts = flat(PARAPHRASES[:1])
    assert StaticEmbedder(model_dir=copy).embed(texts).tobytes() == static.embed(texts).tobytes()
    data = bytearray((copy / name).read_bytes())
    data[len(data) // 2] ^= 0x01
    (copy / name).write_bytes(bytes(data))
    with pytest.raises(EmbedderError, match=rf"{name} in .* has sha256 [0-9a-f]{{64}}, not the"):
        StaticEmbedder(model_dir=copy)


@pytest.mark.parametrize("name", sorted(MODEL_SHA256))
def test_a_missing_model_file_is_refused(tmp_path: Path, name: str) -> None:
    """A model directory without one of the files is an EmbedderError naming the file."""
    copy = package_copy(tmp_path)
    (copy / name).unlink()
    with pytest.raises(EmbedderError, match=rf"cannot read the static model file {name} in"):
        StaticEmbedder(model_dir=copy)


# --- quality -------------------------------------------------------------------------------


def test_static_embedder_puts_paraphrases_above_unrelated_pairs(static: StaticEmbedder) -> None:
    """Paraphrases that share words are closer than every unrelated pair, with a margin."""
    para, unrelated = pair_cosines(static.embed(flat(PARAPHRASES)), len(PARAPHRASES))
    assert min(para) > max(unrelated) + 0.2, (min(para), max(unrelated))


def test_static_embedder_relates_words_hashing_cannot(static: StaticEmbedder) -> None:
    """On paraphrases without shared words, each pair is closer than every unrelated pair
    and the mean paraphrase cosine is far above HashEmbedder's (the model relates words)."""
    n = len(SEMANTIC_PARAPHRASES)
    para, unrelated = pair_cosines(static.embed(flat(SEMANTIC_PARAPHRASES)), n)
    hash_para, _ = pair_cosines(HashEmbedder().embed(flat(SEMANTIC_PARAPHRASES)), n)
    assert min(para) > max(unrelated), (min(para), max(unrelated))
    assert np.mean(para) > np.mean(hash_para) + 0.3


def test_static_embedder_agrees_with_model2vec(static: StaticEmbedder) -> None:
    """The vectors point where model2vec's own ``StaticModel.encode`` does (cosine >= 0.999:
    model2vec rounds its output to float16), long and unusual texts included, and the texts
    with no known piece are zero in both."""
    import model2vec  # a dev dependency: the oracle the lookup is held to

    model = model2vec.StaticModel.from_pretrained(cortexgraph_minilm_static.model_dir())
    texts = [*flat(PARAPHRASES), "deploy " * 1000, "naïve café 日本語 x-ray", "", "🙂"]
    ours = static.embed(texts).astype(np.float64)
    theirs = model.encode(texts).astype(np.float64)
    norms = np.linalg.norm(theirs, axis=1)
    assert (norms == 0).tolist() == [False] * (len(texts) - 2) + [True, True]
    cosines = np.einsum("ij,ij->i", ours[:-2], theirs[:-2]) / norms[:-2]
    assert cosines.min() >= 0.999, cosines.min()


def test_a_store_recalls_by_meaning_with_the_static_embedder(
    tmp_path: Path, static: StaticEmbedder
) -> None:
    """Through a store, vector recall finds the paraphrase of the question first, and the
    store records the embedder's name."""
    with cg.open(tmp_path, "agent", embedder=static, sync=False) as cx:
        uris = {a: cx.write(cg.Fact(text=a)) for a, _ in PARAPHRASES}
        for memory, question in PARAPHRASES:
            assert cx.recall(question, k=3, mode="vector").uris[0] == uris[memory], question
        assert cx.embedder.name == "all-MiniLM-L6-v2:static-1"


# --- batch invariance and determinism ------------------------------------------------------

sentences = st.lists(st.sampled_from(WORDS), max_size=40).map(" ".join)
any_text = st.one_of(sentences, st.text(max_size=300))


@settings(max_examples=80)
@given(pool=st.lists(any_text, min_size=1, max_size=16), data=st.data())
@example(pool=["", "🙂", "deploy " * 600, "the the the"], data=None)
def test_a_texts_vector_does_not_depend_on_its_batch(
    static: StaticEmbedder, pool: list[str], data: st.DataObject | None
) -> None:
    """Random texts in random batches, in random positions, with repeats: every row is the
    same bytes as the text embedded alone."""
    alone = {text: static.embed([text])[0].tobytes() for text in pool}
    if data is None:  # the pinned example: all together, then reversed, one batch each
        batches = [pool, pool[::-1]]
    else:
        order = data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=40))
        cuts = sorted(data.draw(st.lists(st.integers(0, len(order)), max_size=4)))
        batches = [order[a:b] for a, b in itertools.pairwise([0, *cuts, len(order)])]
    for batch in batches:
        rows = static.embed(batch)
        assert [row.tobytes() for row in rows] == [alone[text] for text in batch]


def test_static_vectors_are_identical_across_processes_offline(
    static: StaticEmbedder, tmp_path: Path
) -> None:
    """Two fresh interpreters, with every socket call refused and an empty Hugging Face
    cache, print the same bytes as this process for the same texts."""
    texts = [*flat(PARAPHRASES[:3]), "naïve café 日本語", ""]
    paths = [Path(cg.__file__).parents[1], cortexgraph_minilm_static.model_dir().parent]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
    env["HF_HOME"] = str(tmp_path / "hf-home")
    outputs = [run_python(SUBPROCESS_SCRIPT % (texts,), env, timeout=120) for _ in range(2)]
    assert [out.strip() for out in outputs] == [static.embed(texts).tobytes().hex()] * 2
    assert not (tmp_path / "hf-home").exists(), "nothing may be cached or downloaded"
