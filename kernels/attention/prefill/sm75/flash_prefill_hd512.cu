// sm_75 (Turing) hd512 prefill: 16 rows, 16-key tiles, 2 warps (256 head dims each), ONE stage
// (50 KB; two stages would need 82 KB).
#include "kernels/attention/sm80/flash_prefill_sm80.cuh"

GANNET_DEFINE_FLASH_PREFILL(PrefillHd512Sm75, 512, 16, 16, 1, 2, 1, false, 750)
