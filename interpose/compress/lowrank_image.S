// The fat binary of lowrank_kernels.cu (built by nvcc; its path comes in as VC_LOWRANK_FATBIN),
// embedded read-only in the library for cuModuleLoadData (lowrank_device.h). Data only.
    .section .rodata
    .balign 64
    .globl vc_lowrank_image
    .hidden vc_lowrank_image
vc_lowrank_image:
    .incbin VC_LOWRANK_FATBIN
    .globl vc_lowrank_image_end
    .hidden vc_lowrank_image_end
vc_lowrank_image_end:
    .byte 0
    .section .note.GNU-stack,"",@progbits
