/* Compiled as C99 with -pedantic -Werror: the public header must be plain C. */
#include "gannet/gannet.h"

#include <stdio.h>

int main(void) {
  gannet_engine_config_t config = GANNET_ENGINE_CONFIG_INIT;
  gannet_request_t request = GANNET_REQUEST_INIT;
  gannet_sampling_params_t sampling = GANNET_SAMPLING_PARAMS_INIT;
  gannet_engine_stats_t stats = GANNET_ENGINE_STATS_INIT;
  gannet_chat_message_t message = {"user", "hi"};
  (void)message;
  if (config.struct_size != sizeof(config) || request.struct_size != sizeof(request) ||
      sampling.struct_size != sizeof(sampling) || stats.struct_size != sizeof(stats) ||
      request.sampling.struct_size != sizeof(sampling)) {
    fprintf(stderr, "an _INIT macro does not set struct_size\n");
    return 1;
  }
  if (gannet_status_string(GANNET_ERR_NOT_FOUND)[0] != 'G') return 1;
  printf("gannet.h compiles as C99; library version %s\n", gannet_version());
  return 0;
}
