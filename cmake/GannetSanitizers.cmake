# GANNET_SANITIZE=asan (address+undefined) or tsan (thread). Applied to every target so that the
# sanitizer runtimes see the whole program; CUDA device code is not instrumented.
set(GANNET_SANITIZE "" CACHE STRING "Sanitizer build: empty, asan or tsan")
if(GANNET_SANITIZE STREQUAL "asan")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX,C>:-fsanitize=address,undefined>
                      $<$<COMPILE_LANGUAGE:CXX,C>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX,C>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=address,undefined)
elseif(GANNET_SANITIZE STREQUAL "tsan")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX,C>:-fsanitize=thread>)
  add_link_options(-fsanitize=thread)
elseif(NOT GANNET_SANITIZE STREQUAL "")
  message(FATAL_ERROR "GANNET_SANITIZE must be empty, asan or tsan")
endif()
