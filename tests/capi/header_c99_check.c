/* Compiled as C99 with -pedantic -Werror: the public header must be plain C, and every _INIT
 * macro must initialise every field (no missing-initializer warnings) and set struct_size. */
#include "gannet/gannet.h"

#include <stdio.h>

int main(void) {
  gannet_engine_config_t config = GANNET_ENGINE_CONFIG_INIT;
  gannet_request_t request = GANNET_REQUEST_INIT;
  gannet_engine_stats_t stats = GANNET_ENGINE_STATS_INIT;
  gannet_model_info_t info = GANNET_MODEL_INFO_INIT;
  gannet_tokenizer_info_t tinfo = GANNET_TOKENIZER_INFO_INIT;
  gannet_chat_message_t message = GANNET_CHAT_MESSAGE_INIT;
  message.role = "user";
  message.content = "hi";
  if (config.struct_size != sizeof(config) || request.struct_size != sizeof(request) ||
      stats.struct_size != sizeof(stats) || info.struct_size != sizeof(info) ||
      tinfo.struct_size != sizeof(tinfo) || message.struct_size != sizeof(message)) {
    fprintf(stderr, "an _INIT macro does not set struct_size\n");
    return 1;
  }
  if (request.seed_mode != GANNET_SEED_RANDOM || request.temperature != 0.0f) return 1;
  if (gannet_status_string(GANNET_ERR_NOT_FOUND)[0] != 'G') return 1;
  if (gannet_version_code() != GANNET_VERSION_CODE || gannet_abi_version() != GANNET_ABI_VERSION) {
    fprintf(stderr, "the library's version (%d, ABI %d) is not the header's\n",
            (int)gannet_version_code(), (int)gannet_abi_version());
    return 1;
  }
  printf("gannet.h compiles as C99; library version %s (ABI %d)\n", gannet_version(),
         (int)gannet_abi_version());
  return 0;
}
