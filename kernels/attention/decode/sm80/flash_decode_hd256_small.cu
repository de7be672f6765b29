// hd256 decode, 16-key tiles (48 KB): the fallback for small shared memory.
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd256Small, 256, 16, 4, 2)
