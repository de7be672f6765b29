/* Prints the size of every struct of include/gannet/gannet.h, one "name size" per line, for
 * bindings that mirror the header by hand (examples/rust/gannet-sys) to compare against. */
#include <stdio.h>

#include "gannet/gannet.h"

#define PRINT_SIZE(type) printf("%s %zu\n", #type, sizeof(type))

int main(void) {
  PRINT_SIZE(gannet_engine_config_t);
  PRINT_SIZE(gannet_model_info_t);
  PRINT_SIZE(gannet_progress_t);
  PRINT_SIZE(gannet_chat_message_t);
  PRINT_SIZE(gannet_request_t);
  PRINT_SIZE(gannet_event_t);
  PRINT_SIZE(gannet_engine_stats_t);
  PRINT_SIZE(gannet_tokenizer_info_t);
  return 0;
}
