"""A ChatRWKV-style script (the rwkv pip package's README example) run on wick: only the two
imports differ from the original. Usage:

    PYTHONPATH=build/python /usr/bin/python3 python/examples/chat_rwkv_style.py MODEL [TOKENS]

MODEL: an RWKV-7 World checkpoint, with or without '.pth' (e.g. RWKV-x070-World-0.1B-...), or
any file wick loads; `build/wick synth --geometry 0.1b --dtype bf16 --seed 1 --out m.safetensors`
makes a random one (its text is meaningless).
"""

import os
import sys
import time

os.environ["RWKV_V7_ON"] = "1"   # accepted and ignored by wick
os.environ["RWKV_JIT_ON"] = "1"
os.environ["RWKV_CUDA_ON"] = "0"

from wick.compat.model import RWKV                   # was: from rwkv.model import RWKV
from wick.compat.utils import PIPELINE, PIPELINE_ARGS  # was: from rwkv.utils import ...

MODEL = sys.argv[1]
TOKENS = int(sys.argv[2]) if len(sys.argv) > 2 else 64

model = RWKV(model=MODEL, strategy="cpu fp32")
pipeline = PIPELINE(model, "rwkv_vocab_v20230424")

ctx = "\nIn a shocking finding, scientist discovered a herd of dragons living in a remote, " \
      "previously unexplored valley, in Tibet. Even more surprising to the researchers was the " \
      "fact that the dragons spoke perfect Chinese."
print(ctx, end="")


def my_print(s):
    print(s, end="", flush=True)


args = PIPELINE_ARGS(temperature=1.0, top_p=0.7, top_k=100,
                     alpha_frequency=0.25, alpha_presence=0.25, alpha_decay=0.996,
                     token_ban=[0], token_stop=[], chunk_len=256)
t0 = time.perf_counter()
pipeline.generate(ctx, token_count=TOKENS, args=args, callback=my_print)
print("\n\n[%d tokens in %.2f s]\n" % (TOKENS, time.perf_counter() - t0))

out, state = model.forward([187, 510, 1563, 310, 247], None)
print(out.detach().cpu().numpy())                   # get logits
out, state = model.forward([187, 510], None)
out, state = model.forward([1563], state)           # RNN has state (use deepcopy to clone it)
out, state = model.forward([310, 247], state)
print(out.detach().cpu().numpy())                   # same result as above
print("\n")
