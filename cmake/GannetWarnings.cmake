# Warning flags for our own host C/C++ (gannet_warnings, linked by every target of this project)
# and for CUDA translation units. Third-party code (abseil, fmt, GoogleTest) is compiled elsewhere
# or included as system headers, so GANNET_WERROR (on in the release, asan, tsan, fuzz and tsa
# presets) applies to ours only. At -O3 GCC 12 reports -Wrestrict and -Wstringop-overflow false
# positives on short string and vector appends ("x" + s, vector::resize then memcpy); the known
# sites are written as appends instead (lib/parallel/step_message.cc, lib/common/dtype.cc,
# examples/cli, tests/model), each with a comment. The release preset's whole build (CUDA, every
# architecture) was seen warning-free at -O3 in CI's run of 2026-12-07 but for that last one
# (dtype.cc) and -Wmaybe-uninitialized notes inside libstdc++'s <regex> (lib/quant), which GCC
# reports from the system header without failing -Werror.
# CUDA translation units (.cu) get -Wall for their host code but not -Werror: nvcc's
# `-Werror all-warnings` would also make its own and the CUDA headers' diagnostics errors, for
# every architecture of the release list and every CUDA update; the .cc files of the CUDA
# backend and kernels are host C++ and are under GANNET_WERROR like the rest.
add_library(gannet_warnings INTERFACE)
target_compile_options(gannet_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wno-unused-parameter -Wno-sign-compare>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall --expt-relaxed-constexpr>
)
if(GANNET_WERROR)
  target_compile_options(gannet_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX,C>:-Werror>)
endif()

# GANNET_THREAD_SAFETY (the tsa preset): clang's thread-safety analysis as errors. It checks the
# annotations of lib/common/mutex.h (members ABSL_GUARDED_BY a mutex, functions that require one).
# A small program that breaks them must fail to compile, so that a flag or header change that
# turns the analysis off fails here instead of passing silently.
option(GANNET_THREAD_SAFETY "clang -Wthread-safety -Werror=thread-safety (the tsa preset)" OFF)
if(GANNET_THREAD_SAFETY)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "GANNET_THREAD_SAFETY needs clang (its analysis): use the tsa preset")
  endif()
  set(_tsa_flags -Wthread-safety -Werror=thread-safety)
  target_compile_options(gannet_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:${_tsa_flags}>)
  # Both as static libraries (no main): the locked read must compile, the unlocked one must not.
  set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
  foreach(_case locked unguarded)
    if(_case STREQUAL "locked")
      set(_body "gannet::MutexLock l(&s.mu); return s.n;")
    else()
      set(_body "return s.n;")
    endif()
    file(WRITE ${CMAKE_BINARY_DIR}/tsa_check/${_case}.cc
      "#include \"lib/common/mutex.h\"\n"
      "struct S { gannet::Mutex mu; int n ABSL_GUARDED_BY(mu) = 0; };\n"
      "int Read(S& s) { ${_body} }\n")
    try_compile(_tsa_${_case} ${CMAKE_BINARY_DIR}/tsa_check/${_case}
      SOURCES ${CMAKE_BINARY_DIR}/tsa_check/${_case}.cc
      COMPILE_DEFINITIONS ${_tsa_flags} -I${PROJECT_SOURCE_DIR}
      CXX_STANDARD 20
      OUTPUT_VARIABLE _tsa_output_${_case})
  endforeach()
  if(NOT _tsa_locked)
    message(FATAL_ERROR "GANNET_THREAD_SAFETY: a locked read of an ABSL_GUARDED_BY member does "
                        "not compile:\n${_tsa_output_locked}")
  endif()
  if(_tsa_unguarded)
    message(FATAL_ERROR "GANNET_THREAD_SAFETY: an unlocked read of an ABSL_GUARDED_BY member "
                        "compiles, so the thread-safety analysis is not active:\n"
                        "${_tsa_output_unguarded}")
  endif()
  message(STATUS "gannet: thread-safety analysis on (an unlocked read fails to compile)")
endif()
