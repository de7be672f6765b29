// hd256 decode for ~100 KB shared-memory parts (sm_86/89/120): 2 stages (76 KB).
#include "kernels/attention/sm80/flash_attn_sm80.cuh"

GANNET_DEFINE_FLASH(DecodeHd256Small, 256, 16, 32, 1, 4, 2)
