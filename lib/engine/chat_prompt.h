// Which of Gemma-4's two built-in chat renderings a model uses (tokenizer/chat_template.h), for
// checkpoints without a template of their own (tokenizer/chat_format.h): the engine's Submit and
// the C ABI's gannet_apply_chat_template render chat prompts through this one place.
#pragma once

#include "lib/model/config.h"
#include "lib/tokenizer/chat_template.h"

namespace gannet::engine {

inline tokenizer::ChatTemplateVariant ChatVariant(model::Variant variant) {
  return variant == model::Variant::kE2B || variant == model::Variant::kE4B
             ? tokenizer::ChatTemplateVariant::kSmall
             : tokenizer::ChatTemplateVariant::kLarge;
}

inline tokenizer::ChatTemplateOptions ChatOptions(model::Variant variant,
                                                  bool add_generation_prompt,
                                                  bool enable_thinking) {
  tokenizer::ChatTemplateOptions o;
  o.variant = ChatVariant(variant);
  o.add_generation_prompt = add_generation_prompt;
  o.enable_thinking = enable_thinking;
  return o;
}

}  // namespace gannet::engine
