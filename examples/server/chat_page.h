// The chat page served at GET / (examples/server/chat_page.html, embedded into gannet-serve when
// it is built: CMake writes its text into chat_page.cc from chat_page.cc.in).
#pragma once

#include <string_view>

namespace gannet_server {

std::string_view ChatPageHtml();

}  // namespace gannet_server
