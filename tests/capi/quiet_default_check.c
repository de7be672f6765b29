/* An embedder that sets no log level creates and destroys an engine with the library's defaults
 * (the backend chosen automatically) and must see nothing on stderr when all is well: the
 * library's default level is WARNING, and a machine without an NVIDIA driver is no warning.
 * usage: capi_quiet_default_check MODEL_DIR (ctest fails it on any "gannet [I]" or "[D]" line,
 * or a CUDA driver complaint). */
#include <stdio.h>

#include "gannet/gannet.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]);
    return 2;
  }
  gannet_engine_config_t config = GANNET_ENGINE_CONFIG_INIT;
  config.model_dir = argv[1];
  gannet_engine_t* engine = NULL;
  if (gannet_engine_create(&config, &engine) != GANNET_OK) {
    fprintf(stderr, "create failed: %s\n", gannet_last_error_message());
    return 1;
  }
  gannet_engine_destroy(engine);
  printf("created and destroyed\n");
  return 0;
}
