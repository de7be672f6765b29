# Warning flags for host C++ (gannet_warnings) and for CUDA translation units.
add_library(gannet_warnings INTERFACE)
target_compile_options(gannet_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-sign-compare>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall --expt-relaxed-constexpr>
)
if(GANNET_WERROR)
  target_compile_options(gannet_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()
