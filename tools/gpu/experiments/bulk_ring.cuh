// Shared by the standalone experiments in this folder (not built by CMake): a shared-memory ring
// filled by one thread with bulk copies (cp.async.bulk, sm_90+) and mbarriers that count the bytes
// landed (full) and the consumers done (empty).
#pragma once

#include <cstdint>

__device__ __forceinline__ uint32_t Smem(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void MbarInit(uint64_t* b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(Smem(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void MbarExpectTx(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(Smem(b)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void MbarArrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(Smem(b)) : "memory");
}
// Waits for the completion of the phase of parity `parity` (the barrier's current phase or the
// one before it: a waiter two phases ahead would pass on the wrong phase).
__device__ __forceinline__ void MbarWait(uint64_t* b, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra W;\n}\n" ::"r"(Smem(b)),
      "r"(parity)
      : "memory");
}
// `bytes` (a multiple of 16, both addresses 16-byte aligned) from global memory into this CTA's
// shared memory, counted against the transaction count of mbarrier `b`.
__device__ __forceinline__ void BulkCopy(void* dst, const void* src, uint32_t bytes, uint64_t* b) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(Smem(dst)),
      "l"(src), "r"(bytes), "r"(Smem(b))
      : "memory");
}
