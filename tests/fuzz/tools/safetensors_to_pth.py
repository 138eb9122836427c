#!/usr/bin/env python3
"""Writes a safetensors checkpoint as a PyTorch zip checkpoint (.pth), without torch.

Used to make small .pth seeds for the fuzz corpora (tests/fuzz/make_corpus.sh). The layout is the
one torch.save writes (format documented in torch/serialization.py): a stored ZIP archive with
<name>/data.pkl (a protocol-2 pickle of an OrderedDict name -> tensor, each tensor a
torch._utils._rebuild_tensor_v2 call on a persistent storage id), <name>/data/<key> (the raw
little-endian bytes of each storage) and <name>/version. The pickle's globals are produced by
stand-in modules registered under torch's names, so the standard pickle module writes them.

usage: safetensors_to_pth.py IN.safetensors OUT.pth
"""
import collections
import json
import pickle
import struct
import sys
import types
import zipfile

STORAGE = {"F32": "FloatStorage", "F16": "HalfStorage", "BF16": "BFloat16Storage"}


def stand_in_modules():
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")
    for name in STORAGE.values():
        cls = type(name, (), {})
        cls.__module__ = "torch"
        cls.__qualname__ = name
        setattr(torch, name, cls)

    def _rebuild_tensor_v2(*args):
        raise RuntimeError("stand-in only")

    _rebuild_tensor_v2.__module__ = "torch._utils"
    _rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2
    torch._utils = utils
    sys.modules["torch"] = torch
    sys.modules["torch._utils"] = utils
    return torch, utils


class Storage:
    def __init__(self, key, storage_type, numel):
        self.key, self.storage_type, self.numel = key, storage_type, numel


class Tensor:
    def __init__(self, storage, shape, rebuild):
        self.storage, self.shape, self.rebuild = storage, shape, rebuild

    def __reduce__(self):
        stride, s = [], 1
        for d in reversed(self.shape):
            stride.insert(0, s)
            s *= d
        return (self.rebuild, (self.storage, 0, tuple(self.shape), tuple(stride), False,
                               collections.OrderedDict()))


class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", obj.storage_type, obj.key, "cpu", obj.numel)
        return None


def main(src, dst):
    torch, utils = stand_in_modules()
    blob = open(src, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    state, raw = collections.OrderedDict(), {}
    for i, (name, t) in enumerate((k, v) for k, v in header.items() if k != "__metadata__"):
        begin, end = t["data_offsets"]
        size = {"F32": 4, "F16": 2, "BF16": 2}[t["dtype"]]
        storage = Storage(str(i), getattr(torch, STORAGE[t["dtype"]]), (end - begin) // size)
        raw[str(i)] = data[begin:end]
        state[name] = Tensor(storage, t["shape"], utils._rebuild_tensor_v2)
    archive = "archive"
    with zipfile.ZipFile(dst, "w", compression=zipfile.ZIP_STORED) as z:
        import io
        buf = io.BytesIO()
        Pickler(buf, protocol=2).dump(state)
        z.writestr(archive + "/data.pkl", buf.getvalue())
        for key, b in raw.items():
            z.writestr(archive + "/data/" + key, b)
        z.writestr(archive + "/version", b"3\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
