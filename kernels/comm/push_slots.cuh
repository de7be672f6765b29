// The push all-reduce's slots in a rank's workspace (kernels/comm/custom_allreduce.h), for the
// kernels that store into them: the all-reduce kernels themselves, and a projection whose epilogue
// sends this rank's addend of the next fused call straight to its peers (AllReducePush).
//
// Layout (bytes): flags [kMaxBlocks][kMaxRanks] u32 | epochs [kMaxBlocks] u32 | push call counter
// and its blocks-done count (2 u32) | padding to 256 | data [2][kCustomAllReduceMaxBytes] | push
// slots [2][kMaxRanks][kCustomAllReducePushMaxBytes]. Element e of a message (of either size) is
// at byte e * its size of its sender's slot in the call's set; a slot is zero until data lands and
// no sender stores a zero element (+0 goes as -0), so arrival is the data itself.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/comm/custom_allreduce.h"

namespace gannet::kernels::push_slots {

constexpr size_t kFlagsBytes =
    sizeof(uint32_t) * kCustomAllReduceMaxBlocks * kCustomAllReduceMaxRanks;
constexpr size_t kEpochOffset = kFlagsBytes;
constexpr size_t kCallOffset = kEpochOffset + sizeof(uint32_t) * kCustomAllReduceMaxBlocks;
constexpr size_t kDataOffset = (kCallOffset + sizeof(uint32_t) * 2 + 255) / 256 * 256;
constexpr size_t kSlotsOffset = kDataOffset + 2 * kCustomAllReduceMaxBytes;
constexpr size_t kSlotBytes = kCustomAllReducePushMaxBytes;
constexpr size_t kWorkspaceBytes = kSlotsOffset + 2 * kCustomAllReduceMaxRanks * kSlotBytes;

// The push call counter of a workspace: [0] the call, [1] blocks done with it.
__device__ __forceinline__ uint32_t* CallCounter(char* ws) {
  return reinterpret_cast<uint32_t*>(ws + kCallOffset);
}
// Byte offset, within the slots, of the set a call uses (two sets alternate with the calls).
__device__ __forceinline__ size_t SetOf(uint32_t call) {
  return (call & 1) * kCustomAllReduceMaxRanks * kSlotBytes;
}
// Sender `sender`'s slot of the set at `set` in workspace ws.
__device__ __forceinline__ char* Slot(char* ws, size_t set, int sender) {
  return ws + kSlotsOffset + set + sender * kSlotBytes;
}

// +0 elements as -0 (only the sign bit set), so no element that is sent reads as "not arrived".
__device__ __forceinline__ uint32_t NoZeroF32(uint32_t w) { return w == 0 ? 0x80000000u : w; }
__device__ __forceinline__ uint32_t NoZeroBf16Pair(uint32_t w) {
  if ((w & 0xFFFFu) == 0) w |= 0x8000u;
  if ((w >> 16) == 0) w |= 0x80000000u;
  return w;
}

__device__ __forceinline__ void StoreVolatile(uint4* p, const uint4& v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void StoreVolatile(uint2* p, const uint2& v) {
  asm volatile("st.volatile.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(v.x), "r"(v.y) : "memory");
}

}  // namespace gannet::kernels::push_slots
