#include "lib/parallel/step_channel.h"

#include <cstdlib>

namespace gannet::parallel {

namespace {

// A positive number of seconds from the environment, else `fallback`.
double EnvSeconds(const char* name, double fallback) {
  const char* env = std::getenv(name);
  const double v = env != nullptr ? std::atof(env) : 0.0;
  return v > 0 ? v : fallback;
}

}  // namespace

double GroupTimeoutSeconds() { return EnvSeconds("GANNET_TP_TIMEOUT_S", 30.0); }
double JoinTimeoutSeconds() { return EnvSeconds("GANNET_TP_JOIN_TIMEOUT_S", 300.0); }

}  // namespace gannet::parallel
