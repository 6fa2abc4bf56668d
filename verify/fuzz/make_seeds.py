#!/usr/bin/env python3
"""Writes the safetensors seed corpus (verify/fuzz/seeds/safetensors/): small
files in the format's exact layout (8-byte little-endian header length, JSON
header padded with spaces to an 8-byte boundary, raw little-endian data), one
per dtype the reader takes, plus metadata, an empty tensor and a scalar.
Run again only to change the seeds: python3 verify/fuzz/make_seeds.py"""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds", "safetensors")
FORMATS = {"F32": "f", "F64": "d", "I64": "q", "I32": "i"}


def encode(tensors, metadata=None):
    header, data = {}, b""
    for name, dtype, shape, values in tensors:
        raw = struct.pack("<" + FORMATS[dtype] * len(values), *values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


SEEDS = {
    "f32-linear.safetensors": encode([("0.weight", "F32", [2, 3], [0.5, -1.0, 2.0, 3.25, 0.0, -0.125]),
                                      ("0.bias", "F32", [2], [1.0, -1.0])]),
    "f64-module-prefix.safetensors": encode([("module.fc.weight", "F64", [1, 2], [1e-300, -2.5])],
                                            {"format": "pt", "step": "3"}),
    "i64-labels.safetensors": encode([("labels", "I64", [4], [0, 3, 1, 2]),
                                      ("inputs", "F32", [4, 1], [1.0, 2.0, 3.0, 4.0])]),
    "i32-scalar-and-empty.safetensors": encode([("count", "I32", [], [7]), ("none", "F32", [0, 5], [])]),
}

if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for name, blob in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(blob)
    print(f"wrote {len(SEEDS)} seeds to {OUT}")
