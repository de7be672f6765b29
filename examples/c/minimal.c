/* minimal.c: the smallest complete gannet program. It loads a model, sends one chat message,
 * streams the greedy answer to stdout and shuts down, using only include/gannet/gannet.h.
 *
 *   usage: minimal MODEL_DIR [PROMPT] [MAX_TOKENS]
 *
 * Its stdout is the same as `gannet generate -m MODEL_DIR --chat -p PROMPT -n MAX_TOKENS -q`.
 * Build: cc -std=c99 minimal.c $(pkg-config --cflags --libs gannet)
 */
#include <stdio.h>
#include <stdlib.h>

#include "gannet/gannet.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    fprintf(stderr, "usage: %s MODEL_DIR [PROMPT] [MAX_TOKENS]\n", argv[0]);
    return 2;
  }
  const char* prompt = argc > 2 ? argv[2] : "Write a haiku about gannets.";
  const int max_tokens = argc > 3 ? atoi(argv[3]) : 128;
  /* Library log messages go to stderr; keep them to warnings and errors, as the CLI does. */
  if (getenv("GANNET_LOG_LEVEL") == NULL) {
    gannet_set_log_callback(NULL, NULL, GANNET_LOG_LEVEL_WARNING);
  }

  gannet_engine_config_t config = GANNET_ENGINE_CONFIG_INIT;
  config.model_dir = argv[1]; /* backend NULL: CUDA when a GPU is usable, else the CPU */
  gannet_engine_t* engine = NULL;
  if (gannet_engine_create(&config, &engine) != GANNET_OK) {
    fprintf(stderr, "cannot load %s: %s\n", argv[1], gannet_last_error_message());
    return 1;
  }

  /* The request only has to live until submit returns: the engine copies what it needs. */
  gannet_chat_message_t message = GANNET_CHAT_MESSAGE_INIT;
  message.role = "user";
  message.content = prompt;
  gannet_request_t request = GANNET_REQUEST_INIT; /* temperature 0: greedy */
  request.messages = &message;
  request.num_messages = 1;
  request.max_tokens = max_tokens;
  uint64_t id = 0;
  if (gannet_engine_submit(engine, &request, &id) != GANNET_OK) {
    fprintf(stderr, "submit failed: %s\n", gannet_last_error_message());
    gannet_engine_destroy(engine);
    return 1;
  }

  /* Poll until this request's last event (FINISH or ERROR). Text arrives as UTF-8 deltas, on
   * TOKEN events and possibly on FINISH (text held back while it could start a stop string). */
  int status = -1;
  while (status < 0) {
    const gannet_event_t* const* events = NULL; /* pointers: events can grow */
    size_t count = 0;
    if (gannet_engine_poll(engine, 100, 64, &events, &count) != GANNET_OK) {
      fprintf(stderr, "poll failed: %s\n", gannet_last_error_message());
      status = 1;
      break;
    }
    for (size_t i = 0; i < count; ++i) {
      const gannet_event_t* e = events[i];
      if (e->request_id != id) continue;
      if (e->text_len > 0) {
        fwrite(e->text, 1, e->text_len, stdout);
        fflush(stdout);
      }
      if (e->type == GANNET_EVENT_ERROR) {
        fprintf(stderr, "\nrequest failed: %s: %s\n", gannet_status_string(e->status), e->message);
        status = 1;
      } else if (e->type == GANNET_EVENT_FINISH) {
        printf("\n");
        status = 0;
      }
    }
  }
  gannet_engine_destroy(engine);
  return status;
}
