"""safetensors read and written with json and numpy only, from the format's
specification (https://huggingface.co/docs/safetensors, "Format"), not from
the safetensors package: an independent implementation for
serialization/safetensors_interop_test.cc and the Hugging Face references.

  8 bytes    N, unsigned little-endian
  N bytes    UTF-8 JSON: {name: {"dtype", "shape", "data_offsets": [b, e]},
             "__metadata__": {str: str}}, optionally padded with spaces
  the rest   each tensor's bytes, C order, little-endian, at data_offsets
             (relative to the end of the header), packed without gaps

numpy has no bfloat16: BF16 tensors are handled as their uint16 bit
patterns (BF16_BITS below).

Usage (Debian's /usr/bin/python3 with python3-numpy):
  safetensors_numpy.py write PATH   the reference tensors and metadata
  safetensors_numpy.py check PATH   exits 1 unless PATH holds exactly them
"""

import json
import struct
import sys

import numpy as np

DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # bit patterns
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}


def to_bf16_bits(values):
    """float32 values exactly representable in bfloat16 -> their bits."""
    bits = np.asarray(values, dtype="<f4").view("<u4")
    assert np.all(bits & 0xFFFF == 0), "not exact in bfloat16"
    return (bits >> 16).astype("<u2")


def from_bf16_bits(bits):
    return (np.asarray(bits, dtype="<u4") << 16).view("<f4")


def save(path, tensors, metadata=None, pad_header=False):
    """tensors: list of (name, dtype name, numpy array), stored in that order.

    Without pad_header the header is exactly the JSON (the spec allows both).
    """
    header = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    offset = 0
    blobs = []
    for name, dtype, array in tensors:
        data = np.ascontiguousarray(array, dtype=DTYPES[dtype]).tobytes()
        header[name] = {
            "dtype": dtype,
            "shape": list(np.shape(array)),
            "data_offsets": [offset, offset + len(data)],
        }
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, ensure_ascii=False).encode("utf-8")
    if pad_header:
        text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def load(path):
    """-> ({name: (dtype name, numpy array)}, metadata dict)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError("%s: header length %d past the end" % (path, n))
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    data = raw[8 + n:]
    spans = sorted((info["data_offsets"], name) for name, info in header.items())
    end = 0
    for (begin, stop), name in spans:
        if begin != end:
            raise ValueError("%s: %s starts at %d, expected %d" %
                             (path, name, begin, end))
        end = stop
    if end != len(data):
        raise ValueError("%s: tensors cover %d of %d data bytes" %
                         (path, end, len(data)))
    tensors = {}
    for name, info in header.items():
        begin, stop = info["data_offsets"]
        dtype = DTYPES[info["dtype"]]
        array = np.frombuffer(data[begin:stop], dtype=dtype)
        tensors[name] = (info["dtype"], array.reshape(info["shape"]))
    return tensors, metadata


# The reference tensors (C++ builds the same from the same formulas: see
# ReferenceTensors() in serialization/safetensors_interop_test.cc). i counts
# 0..11 over a [3, 4] tensor; floats are (i - 6) * 1.5, integers i - 6, U8
# i + 10, BOOL i % 3 == 0; plus a 0-d F32 7.25 and an empty [0, 5] F32.
def reference_tensors():
    i = np.arange(12).reshape(3, 4)
    floats = ((i - 6) * 1.5).astype("<f4")
    tensors = [
        ("f64", "F64", floats.astype("<f8")),
        ("f32", "F32", floats),
        ("f16", "F16", floats.astype("<f2")),
        ("bf16", "BF16", to_bf16_bits(floats)),
        ("i64", "I64", i - 6),
        ("i32", "I32", i - 6),
        ("i16", "I16", i - 6),
        ("i8", "I8", i - 6),
        ("u8", "U8", i + 10),
        ("bool", "BOOL", i % 3 == 0),
        ("scalar", "F32", np.array(7.25, dtype="<f4")),
        ("empty", "F32", np.zeros((0, 5), dtype="<f4")),
    ]
    return tensors


REFERENCE_METADATA = {"writer": "numpy", "note": "h\u00e9llo"}


def check(path):
    tensors, metadata = load(path)
    problems = []
    if metadata != REFERENCE_METADATA:
        problems.append("metadata %r != %r" % (metadata, REFERENCE_METADATA))
    expected = reference_tensors()
    if sorted(tensors) != sorted(name for name, _, _ in expected):
        problems.append("names %s" % sorted(tensors))
    for name, dtype, array in expected:
        if name not in tensors:
            continue
        got_dtype, got = tensors[name]
        want = np.asarray(array, dtype=DTYPES[dtype])
        if got_dtype != dtype or got.shape != want.shape or not np.array_equal(
                got, want):
            problems.append("%s: got %s %s %r, want %s %s %r" %
                            (name, got_dtype, got.shape, got, dtype,
                             want.shape, want))
    if problems:
        print("\n".join(problems))
        sys.exit(1)


def main():
    command, path = sys.argv[1], sys.argv[2]
    if command == "write":
        # Name order, unpadded: the U8 / BOOL / I8 tensors leave later ones
        # unaligned, which readers must handle.
        save(path, sorted(reference_tensors()), REFERENCE_METADATA)
    elif command == "check":
        check(path)
    else:
        sys.exit("unknown command " + command)


if __name__ == "__main__":
    main()
