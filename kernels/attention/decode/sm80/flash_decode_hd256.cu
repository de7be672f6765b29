// hd256 decode: 16 GQA-packed rows, 32-key tiles, 4 warps split keys / head dim, 3 stages (110 KB: two CTAs per H100 SM).
#include "kernels/attention/sm80/flash_attn_sm80.cuh"

GANNET_DEFINE_FLASH(DecodeHd256, 256, 16, 32, 1, 4, 3)
