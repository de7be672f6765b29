// Which of Gemma-4's two chat templates a model uses (tokenizer/chat_template.h): the engine's
// Submit and the C ABI's gannet_apply_chat_template render chat prompts through this one place.
#pragma once

#include "lib/model/config.h"
#include "lib/tokenizer/chat_template.h"

namespace gannet::engine {

inline tokenizer::ChatTemplateOptions ChatOptions(model::Variant variant,
                                                  bool add_generation_prompt,
                                                  bool enable_thinking) {
  tokenizer::ChatTemplateOptions o;
  o.variant = variant == model::Variant::kE2B || variant == model::Variant::kE4B
                  ? tokenizer::ChatTemplateVariant::kSmall
                  : tokenizer::ChatTemplateVariant::kLarge;
  o.add_generation_prompt = add_generation_prompt;
  o.enable_thinking = enable_thinking;
  return o;
}

}  // namespace gannet::engine
