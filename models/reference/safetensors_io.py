# Minimal, dependency-free safetensors reader and writer (F32, BF16, F16) for the reference.
# Writes tensors sorted by name, header padded to 8 bytes; supports sharded models with an index json.
import json
import os
import struct

import numpy as np

DTYPE_SIZE = {"F32": 4, "BF16": 2, "F16": 2}
INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"


def f32_to_bf16_bits(x):
    """float32 array -> uint16 bf16 bit patterns, round to nearest even (NaN stays NaN)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    out = rounded.astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    out[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)  # keep sign, force quiet NaN
    return out


def bf16_bits_to_f32(bits):
    """uint16 bf16 bit patterns -> float32 array (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def encode(x, dtype):
    """float array -> raw little-endian bytes in dtype."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "F32":
        return x.astype("<f4").tobytes()
    if dtype == "F16":
        return x.astype("<f2").tobytes()
    if dtype == "BF16":
        return f32_to_bf16_bits(x).astype("<u2").tobytes()
    raise ValueError(f"unsupported dtype {dtype!r}")


def decode(buf, dtype, shape):
    """raw bytes in dtype -> float32 array of shape."""
    if dtype == "F32":
        x = np.frombuffer(buf, dtype="<f4")
    elif dtype == "F16":
        x = np.frombuffer(buf, dtype="<f2").astype(np.float32)
    elif dtype == "BF16":
        x = bf16_bits_to_f32(np.frombuffer(buf, dtype="<u2"))
    else:
        raise ValueError(f"unsupported dtype {dtype!r}")
    return x.astype(np.float32).reshape(shape)


def save_file(path, tensors, dtypes=None, default_dtype="F32", metadata=None):
    """Write {name: array} to one safetensors file; dtypes maps name -> F32/BF16/F16."""
    dtypes = dtypes or {}
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        dtype = dtypes.get(name, default_dtype)
        blob = encode(tensors[name], dtype)
        header[name] = {"dtype": dtype, "shape": list(np.shape(tensors[name])),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if metadata:
        header = {"__metadata__": dict(metadata), **header}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    return offset


def read_header(path):
    """Return (header dict without __metadata__, byte offset where tensor data starts)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        if size < 8:
            raise ValueError(f"{path}: too short for a safetensors header")
        (n,) = struct.unpack("<Q", f.read(8))
        if 8 + n > size:
            raise ValueError(f"{path}: header length {n} past end of file")
        header = json.loads(f.read(n).decode("utf-8"))
    header.pop("__metadata__", None)
    return header, 8 + n


def load_file(path):
    """Read one safetensors file -> ({name: float32 array}, {name: dtype})."""
    header, start = read_header(path)
    data_len = os.path.getsize(path) - start
    tensors, dtypes = {}, {}
    with open(path, "rb") as f:
        for name, info in header.items():
            dtype, shape = info["dtype"], tuple(info["shape"])
            begin, end = info["data_offsets"]
            count = int(np.prod(shape, dtype=np.int64))
            if dtype not in DTYPE_SIZE:
                raise ValueError(f"{path}: tensor {name}: unsupported dtype {dtype}")
            if not (0 <= begin <= end <= data_len) or end - begin != count * DTYPE_SIZE[dtype]:
                raise ValueError(f"{path}: tensor {name}: bad data_offsets {begin},{end}")
            f.seek(start + begin)
            tensors[name] = decode(f.read(end - begin), dtype, shape)
            dtypes[name] = dtype
    return tensors, dtypes


def save_sharded(model_dir, tensors, dtypes=None, default_dtype="F32", n_shards=2):
    """Split tensors (sorted by name, by bytes) into n_shards files plus model.safetensors.index.json."""
    dtypes = dtypes or {}
    names = sorted(tensors)
    nbytes = {n: int(np.size(tensors[n])) * DTYPE_SIZE[dtypes.get(n, default_dtype)] for n in names}
    total = sum(nbytes.values())
    groups, acc = [[] for _ in range(n_shards)], 0
    for n in names:  # contiguous split: shard i holds bytes near [i, i+1) * total / n_shards
        groups[min(n_shards - 1, acc * n_shards // max(total, 1))].append(n)
        acc += nbytes[n]
    if any(not g for g in groups):
        raise ValueError(f"too few tensors for {n_shards} shards")
    weight_map = {}
    for i, group in enumerate(groups):
        shard = f"model-{i + 1:05d}-of-{n_shards:05d}.safetensors"
        save_file(os.path.join(model_dir, shard), {n: tensors[n] for n in group},
                  dtypes, default_dtype, metadata={"format": "pt"})
        weight_map.update({n: shard for n in group})
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(model_dir, INDEX_NAME), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")


def save_model(model_dir, tensors, dtypes=None, default_dtype="F32", n_shards=1):
    """Write a model directory's weights: model.safetensors, or shards + index when n_shards > 1."""
    if n_shards > 1:
        save_sharded(model_dir, tensors, dtypes, default_dtype, n_shards)
    else:
        save_file(os.path.join(model_dir, SINGLE_NAME), tensors, dtypes, default_dtype,
                  metadata={"format": "pt"})


def load_model(model_dir):
    """Read every tensor of a model directory (single file or index + shards) -> ({name: f32}, {name: dtype})."""
    index_path = os.path.join(model_dir, INDEX_NAME)
    if not os.path.exists(index_path):
        return load_file(os.path.join(model_dir, SINGLE_NAME))
    with open(index_path) as f:
        weight_map = json.load(f)["weight_map"]
    tensors, dtypes = {}, {}
    for shard in sorted(set(weight_map.values())):
        t, d = load_file(os.path.join(model_dir, shard))
        for name in t:
            if weight_map.get(name) != shard:
                raise ValueError(f"{shard}: tensor {name} not mapped to this shard in the index")
        tensors.update(t)
        dtypes.update(d)
    missing = sorted(set(weight_map) - set(tensors))
    if missing:
        raise ValueError(f"index names tensors missing from shards: {missing[:5]}")
    return tensors, dtypes
