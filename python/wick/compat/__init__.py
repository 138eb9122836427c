"""The `rwkv` pip package's API (ChatRWKV, v7) on top of wick.

    from wick.compat.model import RWKV                  # was: from rwkv.model import RWKV
    from wick.compat.utils import PIPELINE, PIPELINE_ARGS

Signatures and behaviours are the pip package's (rwkv 0.8.x with RWKV_V7_ON=1): the state is a
list of 3·L float32 arrays in its order and layout, mutated in place; PIPELINE.generate streams
through a callback; PIPELINE_ARGS has its defaults. Differences: arrays are numpy arrays (torch
tensors when torch is importable), only CPU strategies run, and sampling draws from wick's seeded
SplitMix64 stream (its seed taken from numpy's global generator), so seeded outputs are not
token-for-token those of the pip package.
"""
