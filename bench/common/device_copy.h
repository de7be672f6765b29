// The bandwidth reference every decode benchmark reports against: a device-to-device copy measured
// in the same process (so clocks, ECC and the driver are the same as for the measured work).
#pragma once

namespace gannet::bench {

// GB/s of a 1 GiB device-to-device copy counting bytes read plus bytes written (median of 10 after
// two warm-ups); 0 without a CUDA device or in a build without CUDA.
double MeasureCopyBandwidth();

}  // namespace gannet::bench
