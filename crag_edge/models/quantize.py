"""int8 dynamic quantization of a converted graph: faster on CPU, its vectors close to fp32's
(measured in docs/measurements.md, "Benchmarks")."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from onnxruntime.quantization import QuantType, quantize_dynamic


class _DropPreprocessingHint(logging.Filter):
    """onnxruntime logs a generic "consider pre-processing" hint on every call; it is noise here."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def quantize_int8(src: Path, dst: Path) -> Path:
    """Write `src` with int8 per-channel weights to `dst`; activations are quantized at run time.

    Dynamic quantization needs no calibration data, so `models pull` can run it offline.
    """
    dst.parent.mkdir(parents=True, exist_ok=True)
    # Same directory as dst, so os.replace is atomic and no reader sees a half-written file.
    tmp = dst.with_name(f".{dst.stem}.{os.getpid()}.tmp.onnx")
    hint_filter = _DropPreprocessingHint()
    logging.getLogger().addFilter(hint_filter)
    try:
        quantize_dynamic(src, tmp, per_channel=True, weight_type=QuantType.QInt8)
        os.replace(tmp, dst)
    finally:
        logging.getLogger().removeFilter(hint_filter)
        tmp.unlink(missing_ok=True)
    return dst
