// sm_75 (Turing) hd512 decode: 16-key tiles, 4 warps, ONE stage (55 KB): two 16-key stages of
// K and V alone are 65 KB, over the 64 KB a Turing block has, so each tile is loaded and then
// computed (the copies are synchronous on sm_75 anyway; other warps and CTAs overlap them).
#include "kernels/attention/sm80/flash_decode_sm80.cuh"

GANNET_DEFINE_FLASH_DECODE(DecodeHd512Sm75, 512, 16, 4, 1, false, 750)
