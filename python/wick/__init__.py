"""wick: RWKV-7 ("x070") language models from Python.

The native API (wick._wick, a pybind11 module over the C++ library):

    model = wick.Model(path)                       # .pth / .safetensors / HF folder / .rwkvq
    tok = wick.Tokenizer.for_model(model)
    logits, state = model.forward(tok.encode("Hello"))   # float32 [V]; state advanced in place
    r = wick.generate(model, tok, "Once upon a time", max_tokens=64, temperature=1, seed=7)
    for chunk in wick.generate(model, tok, "Hi", stream=True): print(chunk, end="")

and the `rwkv` pip package's API on top of it: wick.compat.model.RWKV,
wick.compat.utils.PIPELINE / PIPELINE_ARGS.

Arrays are numpy float32 arrays when numpy is importable, else wick.FloatArray (buffer protocol).
Every pass and generation releases the GIL; Ctrl-C cancels a generation cleanly. Errors are
wick.Error subclasses carrying wick's messages.
"""

from ._wick import (  # noqa: F401  (re-exported)
    __version__,
    CheckpointError,
    ContextFullError,
    Engine,
    EngineResult,
    EngineStoppedError,
    Error,
    EvaluationError,
    FileError,
    FloatArray,
    FormatError,
    GenerationResult,
    GenerationStream,
    InputError,
    Model,
    QueueFullError,
    Request,
    Sampler,
    State,
    StateFileError,
    Tokenizer,
    UnsafePickleError,
    default_stop_tokens,
    default_thread_count,
    embed,
    generate,
    kernel_isa,
    perplexity,
    rerank,
)

__all__ = [
    "CheckpointError", "ContextFullError", "Engine", "EngineResult", "EngineStoppedError",
    "Error", "EvaluationError", "FileError", "FloatArray", "FormatError", "GenerationResult",
    "GenerationStream", "InputError", "Model", "QueueFullError", "Request", "Sampler", "State",
    "StateFileError", "Tokenizer", "UnsafePickleError", "default_stop_tokens",
    "default_thread_count", "embed", "generate", "kernel_isa", "perplexity", "rerank",
    "__version__",
]
