"""`rwkv.model.RWKV` (pip package, v7) on wick.

    model = RWKV(model="/path/RWKV-x070-World-1.5B", strategy="cpu fp32")
    out, state = model.forward(tokens, None)           # out: logits [V]; state: 3·L arrays
    out, state = model.forward([token], state)         # continues; state mutated in place
"""

import os
import types

from .. import _wick
from . import _arrays

# strategy dtype -> (wick quantize, wick precision)
_STRATEGY_DTYPES = {
    "fp32": ("none", "fp32"),
    "bf16": ("none", "bf16"),
    "fp32i8": ("int8", "fp32"),
    "bf16i8": ("int8", "bf16"),
}


def parse_strategy(strategy):
    """'cpu fp32' | 'cpu bf16' | 'cpu fp32i8' | 'cpu bf16i8' (layer splits such as
    'cpu fp32 *10 -> cpu fp32' are accepted when every part runs the same way) ->
    (quantize, precision). Raises wick.InputError for CUDA and other devices, for fp16 (the pip
    package does not run it on CPU either) and for parts that differ."""
    if not isinstance(strategy, str):
        raise TypeError("strategy: expected a str such as 'cpu fp32', got %s" % type(strategy).__name__)
    chosen = None
    for part in strategy.split("->"):
        words = part.split()
        if len(words) < 2:
            raise _wick.InputError(
                "strategy '%s': each part is '<device> <dtype>', e.g. 'cpu fp32'" % strategy)
        device, dtype = words[0].lower(), words[1].lower()
        if device != "cpu":
            raise _wick.InputError(
                "strategy '%s': wick runs on the CPU only (%s is not available); use 'cpu fp32' "
                "(exact), 'cpu bf16' or 'cpu fp32i8' (INT8 weights)" % (strategy, device))
        if dtype not in _STRATEGY_DTYPES:
            raise _wick.InputError(
                "strategy '%s': dtype '%s' is not available on the CPU; use fp32, bf16, fp32i8 or "
                "bf16i8" % (strategy, dtype))
        if chosen is not None and chosen != dtype:
            raise _wick.InputError(
                "strategy '%s': wick runs the whole model one way; give one dtype for every part"
                % strategy)
        chosen = dtype
    return _STRATEGY_DTYPES[chosen]


def resolve_model_path(model):
    """The file or folder to load: `model` as given when it exists, else `model + '.pth'` (the
    pip package appends '.pth'); when neither exists the name wick is asked to load (and whose
    absence its FileError reports) is the '.pth' one."""
    path = os.fspath(model)
    if os.path.exists(path) or path.endswith(".pth"):
        return path
    return path + ".pth"


class RWKV:
    """`RWKV(model, strategy)`: an RWKV-7 checkpoint run by wick. `model` is a path with or
    without '.pth' (.safetensors files, HF folders and .rwkvq files as they are). The
    RWKV_V7_ON, RWKV_JIT_ON and RWKV_CUDA_ON variables are accepted and ignored."""

    def __init__(self, model, strategy, verbose=True, convert_and_save_and_exit=None):
        if convert_and_save_and_exit:
            raise _wick.InputError(
                "convert_and_save_and_exit: wick loads checkpoints as they are; no conversion "
                "is needed (use `wick quantize` for smaller files)")
        quantize, precision = parse_strategy(strategy)
        self.wick_model = _wick.Model(resolve_model_path(model), quantize=quantize,
                                      precision=precision)
        g = self.wick_model.geometry
        self.strategy = strategy
        self.version = 7
        self.args = types.SimpleNamespace(
            MODEL_NAME=os.fspath(model), n_layer=g["n_layer"], n_embd=g["n_embd"],
            vocab_size=g["vocab"], head_size=g["head_size"], n_head=g["n_head"],
            n_att=g["n_embd"], n_ffn=g["ffn_dim"])
        self.n_layer = g["n_layer"]
        self.n_embd = g["n_embd"]
        self.n_head = g["n_head"]
        self.head_size = g["head_size"]

    def generate_zero_state(self):
        """A zero state: [3i] att shift [C], [3i+1] WKV [H, N, N] fp32, [3i+2] ffn shift [C]."""
        return [_arrays.to_user(a) for a in _wick._compat_zero_state(self.wick_model)]

    def forward(self, tokens, state, full_output=False):
        """(logits, state): logits float32 [V] of the last token ([T, V] with full_output and
        more than one token, as the pip package); `state` None starts from zero, else it is
        updated in place and returned."""
        if isinstance(tokens, int):
            tokens = [tokens]
        if state is None:
            state = self.generate_zero_state()
        full = bool(full_output) and len(tokens) > 1
        logits = _wick._compat_forward(self.wick_model, tokens, _arrays.native_views(state), full)
        return _arrays.to_user(logits), state

    __call__ = forward
