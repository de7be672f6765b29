# GANNET_SANITIZE=asan (address+undefined), tsan (thread) or fuzz (address+undefined plus
# libFuzzer's coverage instrumentation, clang only: the "fuzz" preset). Applied to every target so
# that the sanitizer runtimes see the whole program; CUDA device code is not instrumented. With
# fuzz, only the fuzz targets (tests/fuzz) link libFuzzer's main (-fsanitize=fuzzer).
# The asan, tsan and fuzz presets compile -O2 -g1: line tables are all a sanitizer report needs
# (function, file, line), and full -g made each compile 2.4x slower under ASan (lib/engine/engine.cc:
# 62 s against 26 s on the 2-core CI-sized machine), most of CI's time before `make test`.
set(GANNET_SANITIZE "" CACHE STRING "Sanitizer build: empty, asan, tsan or fuzz")
if(GANNET_SANITIZE STREQUAL "fuzz")
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "GANNET_SANITIZE=fuzz needs clang (libFuzzer): use the fuzz preset")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:CXX,C>:-fsanitize=address,undefined,fuzzer-no-link>
                      $<$<COMPILE_LANGUAGE:CXX,C>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX,C>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=address,undefined)
elseif(GANNET_SANITIZE STREQUAL "asan")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX,C>:-fsanitize=address,undefined>
                      $<$<COMPILE_LANGUAGE:CXX,C>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX,C>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=address,undefined)
elseif(GANNET_SANITIZE STREQUAL "tsan")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX,C>:-fsanitize=thread>)
  add_link_options(-fsanitize=thread)
elseif(NOT GANNET_SANITIZE STREQUAL "")
  message(FATAL_ERROR "GANNET_SANITIZE must be empty, asan, tsan or fuzz")
endif()
