// Human-readable quantities for log lines and error messages.
#pragma once

#include <cstdint>
#include <string>

namespace gannet {

// "1.50 GiB", "12.00 MiB", "3.00 KiB", "512 B".
std::string FormatBytes(int64_t bytes);

}  // namespace gannet
