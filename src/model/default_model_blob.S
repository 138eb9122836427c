/* The default model, embedded in the library: models/tiny-rwkv7-834K.safetensors (see
   models/README.md for its provenance). Aligned to 64 bytes so the tensors it holds are aligned
   as in the file. */
    .section .rodata
    .balign 64
    .globl wick_default_model_start
    .globl wick_default_model_end
wick_default_model_start:
    .incbin WICK_DEFAULT_MODEL_PATH
wick_default_model_end:
    .byte 0
    .section .note.GNU-stack,"",@progbits
