// hd512 decode for ~100 KB shared-memory parts (sm_86/89/120): 16-key tiles, 2 stages (89 KB).
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd512Small, 512, 16, 4, 2)
