"""`rwkv.utils.PIPELINE` / `PIPELINE_ARGS` (pip package, v7) on wick.

    pipeline = PIPELINE(model, "rwkv_vocab_v20230424")
    text = pipeline.generate(ctx, token_count=100, args=PIPELINE_ARGS(...), callback=print)

Sampling is wick's ChatRWKV-compatible sampler (docs: wick/sampler.h, mode "chatrwkv"): the
penalties with alpha_decay and the space/digit exemption, the top-p cut that keeps ties, top-k,
temperature after the cuts, temperature 0 = the most probable token. The draw uses wick's
SplitMix64 stream seeded from numpy's global generator, so the same numpy.random.seed gives the
same text, though not the pip package's tokens.
"""

from .. import _wick
from . import _arrays


class PIPELINE_ARGS:
    """Generation settings with the pip package's defaults."""

    def __init__(self, temperature=1.0, top_p=0.85, top_k=0, alpha_frequency=0.2,
                 alpha_presence=0.2, alpha_decay=0.996, token_ban=[], token_stop=[],
                 chunk_len=256):
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.alpha_frequency = alpha_frequency  # frequency penalty (per decayed occurrence)
        self.alpha_presence = alpha_presence    # presence penalty (once per seen token)
        self.alpha_decay = alpha_decay          # occurrence weights decay by this per token
        self.token_ban = token_ban              # ids never generated
        self.token_stop = token_stop            # ids that end generation (not fed, not returned)
        self.chunk_len = chunk_len              # prompt fed in chunks of this many tokens


def _tokenizer(name):
    if name in ("rwkv_vocab_v20230424", "rwkv_vocab_v20230424.txt"):
        return _wick.Tokenizer.world()
    if name == "cl100k_base":
        raise _wick.InputError(
            "PIPELINE: cl100k_base is a tiktoken encoding, which wick does not read; give "
            "'rwkv_vocab_v20230424' or a tokenizer.json path")
    return _wick.Tokenizer(name)


class PIPELINE:
    """`PIPELINE(model, WORD_NAME)`: WORD_NAME "rwkv_vocab_v20230424" (the World vocabulary
    embedded in wick), a World vocabulary .txt or a HuggingFace tokenizer.json path."""

    def __init__(self, model, WORD_NAME):
        self.model = model
        self.tokenizer = _tokenizer(WORD_NAME)

    def refine_context(self, context):
        """Strips every line (and U+3000, '\\r'), drops empty lines, and prefixes one '\\n'."""
        lines = [c.strip().strip("\u3000").strip("\r") for c in context.strip().split("\n")]
        context = "\n" + "\n".join(c for c in lines if c != "").strip()
        return context if context != "" else "\n"

    def encode(self, x):
        return self.tokenizer.encode(x)

    def decode(self, x):
        return self.tokenizer.decode(x)

    def _vocab(self, logits):
        return len(logits)

    def sample_logits(self, logits, temperature=1.0, top_p=0.85, top_k=0):
        """One id drawn from logits [V] the PIPELINE way (top-p keeping ties, top-k, then
        temperature; temperature 0 = the most probable id)."""
        sampler = _wick.Sampler(self._vocab(logits), "chatrwkv", temperature=temperature,
                                top_p=top_p, top_k=int(top_k), presence_penalty=0.0,
                                frequency_penalty=0.0, penalty_decay=1.0,
                                seed=_arrays.draw_seed(), exempt_space_digits=False)
        return sampler.select(logits)

    def generate(self, ctx, token_count=100, args=PIPELINE_ARGS(), callback=None, state=None):
        """Continues `ctx` for at most token_count tokens and returns the text. `callback(text)`
        gets each piece that decodes without U+FFFD; `state` (a state list, or None) is updated
        in place and holds the prompt and every generated token except the last one sampled,
        exactly as in the pip package (a stop token is never fed)."""
        sampler = None
        all_tokens = []
        out_last = 0
        out_str = ""
        token = None
        for i in range(token_count):
            tokens = self.encode(ctx) if i == 0 else [token]
            while len(tokens) > 0:
                out, state = self.model.forward(tokens[: args.chunk_len], state)
                tokens = tokens[args.chunk_len:]
            if sampler is None:
                sampler = _wick.Sampler(
                    self._vocab(out), "chatrwkv", temperature=args.temperature,
                    top_p=args.top_p, top_k=int(args.top_k),
                    presence_penalty=args.alpha_presence,
                    frequency_penalty=args.alpha_frequency,
                    penalty_decay=getattr(args, "alpha_decay", 0.996), ban=list(args.token_ban),
                    seed=_arrays.draw_seed(), tokenizer=self.tokenizer)
            token = sampler.select(out)
            if token in args.token_stop:
                break
            sampler.observe(token)
            all_tokens.append(token)
            tmp = self.decode(all_tokens[out_last:])
            if "\ufffd" not in tmp:  # a whole UTF-8 text
                if callback:
                    callback(tmp)
                out_str += tmp
                out_last = i + 1
        return out_str
