/* vramcache's device image in the library's read-only data: the fat binary nvcc makes of
   interpose/piece_hash.cu (piece_hash.fatbin, found on the assembler's include path: the Makefile
   passes the build folder; an empty file where nvcc is missing). Read by interpose/piece_hasher.cc;
   no code here. */
  .section .rodata.vc_piece_hash_image, "a"
  .balign 64
  .globl vc_piece_hash_image
  .hidden vc_piece_hash_image
  .type vc_piece_hash_image, @object
vc_piece_hash_image:
  .incbin "piece_hash.fatbin"
  .globl vc_piece_hash_image_end
  .hidden vc_piece_hash_image_end
vc_piece_hash_image_end:
  .section .note.GNU-stack, "", @progbits
