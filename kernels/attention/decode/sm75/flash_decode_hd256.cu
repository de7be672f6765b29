// sm_75 (Turing) hd256 decode: the sm80 decode kernel with m16n8k8 fp16 MMAs and synchronous
// copies (mma_sm80.cuh), 16-key tiles, 4 warps, 2 stages (48 KB of the 64 KB a Turing block has).
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd256Sm75, 256, 16, 4, 2, false, 750)
