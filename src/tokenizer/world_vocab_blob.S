/* The RWKV World vocabulary, embedded: models/rwkv_vocab_v20230424.txt (see models/README.md). */
    .section .rodata
    .balign 16
    .globl wick_world_vocab_start
    .globl wick_world_vocab_end
wick_world_vocab_start:
    .incbin WICK_WORLD_VOCAB_PATH
wick_world_vocab_end:
    .byte 0
    .section .note.GNU-stack,"",@progbits
