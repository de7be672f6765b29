// What a kernel needs to store this rank's addend of its next push all-reduce into the peers'
// slots itself (kernels/comm/custom_allreduce.h, push_slots.cuh). Plain C++ (no CUDA headers), so
// the layers above can hold one without a CUDA build.
#pragma once

namespace gannet::kernels {

inline constexpr int kCustomAllReduceMaxRanks = 8;

// Where the kernel producing this rank's addend of its next push call stores it into every peer's
// slots itself (kernels/comm/push_slots.cuh), as that call would: bf16 rows [rows, n] contiguous.
// The producer reads the call counter after its PDL wait (the previous call advanced it) and
// stores each element, +0 as -0, where the call would have; the call must be this rank's next push
// call, launched with addend_pushed. The producer runs after this rank's previous call finished
// (kernel order), as the call's own push would, so the slot protocol is unchanged.
struct AllReducePush {
  void* ws[kCustomAllReduceMaxRanks] = {};  // every rank's workspace as this device sees it
  int rank = 0;
  int world = 0;  // 0 or 1: no push
};

}  // namespace gannet::kernels
