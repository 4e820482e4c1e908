"""Export the packaged all-MiniLM-L6-v2 to ONNX, locally, once (`manage.py embedding_export`,
run by `make setup`; the first embedding does it too when the file is missing).

The graph is the whole sentence-transformers pipeline after tokenization: BERT, mean pooling
over the attention mask, L2 normalisation (the model's modules.json: Transformer, Pooling with
`pooling_mode_mean_tokens`, Normalize). Its single output is the unit sentence vector, so the
runtime adds nothing in Python. Then dynamic int8 quantisation of the weights, per channel
(onnxruntime.quantization.quantize_dynamic; per tensor the vectors were much further from the
fp32 ones: cosine 0.946 at worst over 150 questions, against 0.989 per channel): the file the
`onnx-int8` runtime loads.

Needs torch, transformers and onnx, which only this step imports; nothing is downloaded.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)

OPSET = 17


def onnx_export(*, source: Path, target_fp32: Path, target_int8: Path | None) -> None:
    """Write the fp32 graph to `target_fp32` and, when asked, its int8 quantisation to
    `target_int8` (each written to a temporary file first, then renamed)."""
    import torch
    from transformers import AutoModel

    class _SentenceEncoder(torch.nn.Module):
        def __init__(self, bert: torch.nn.Module) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2.0, dim=1)

    bert = AutoModel.from_pretrained(str(source), attn_implementation="eager")
    bert.eval()
    encoder = _SentenceEncoder(bert).eval()
    sample = (
        torch.ones((2, 8), dtype=torch.int64),
        torch.ones((2, 8), dtype=torch.int64),
        torch.zeros((2, 8), dtype=torch.int64),
    )
    target_fp32.parent.mkdir(parents=True, exist_ok=True)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "tokens"} for name in names}
    axes["sentence_embedding"] = {0: "batch"}
    with tempfile.TemporaryDirectory(dir=target_fp32.parent) as work:
        fp32 = Path(work) / "model.onnx"
        with torch.no_grad():
            torch.onnx.export(
                encoder,
                sample,
                str(fp32),
                input_names=names,
                output_names=["sentence_embedding"],
                dynamic_axes=axes,
                opset_version=OPSET,
                do_constant_folding=True,
                dynamo=False,
            )
        if target_int8 is not None:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            int8 = Path(work) / "model-int8.onnx"
            quiet = logging.getLogger()  # the quantiser logs every tensor at INFO on the root
            level = quiet.level
            quiet.setLevel(logging.WARNING)
            try:
                quantize_dynamic(
                    str(fp32), str(int8), weight_type=QuantType.QInt8, per_channel=True
                )
            finally:
                quiet.setLevel(level)
            os.replace(int8, target_int8)
        os.replace(fp32, target_fp32)
    logger.info("Exported %s to %s", source, target_fp32.parent)
