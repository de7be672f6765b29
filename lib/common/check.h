// CHECK for broken internal invariants only. Never use it on a path that input can reach: bad
// input must come back as an absl::Status (docs/errors-and-abi.md).
#pragma once

#include <cstdio>
#include <cstdlib>

#define GANNET_CHECK(cond)                                                                    \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "gannet: CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

#define GANNET_CHECK_OK(expr)                                                            \
  do {                                                                                   \
    auto gannet_check_status_ = (expr);                                                  \
    if (!gannet_check_status_.ok()) {                                                    \
      std::fprintf(stderr, "gannet: CHECK_OK failed at %s:%d: %s\n", __FILE__, __LINE__, \
                   std::string(gannet_check_status_.message()).c_str());                 \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)
