# The ONE place that lists the CUDA architectures gannet compiles for.
#
# GANNET_CUDA_ARCH_SET selects a list:
#   dev      sm_90 only: fast iteration on the H100/H200 we test on.
#   release  every architecture the toolkit can emit: sm_75;80;86;89;90;100 with CUDA 13,
#            plus sm_70 when the compiler is a CUDA 12.x nvcc (CUDA 13 dropped Volta).
# An explicit -DCMAKE_CUDA_ARCHITECTURES=... on the command line wins over both.
#
# The chosen list is exported to C++ as GANNET_COMPILED_CUDA_ARCHS ("75;80;...") so the
# kernel registry can report which architectures this binary carries.

# enable_language(CUDA) caches CMake's own default arch list (nvcc's, e.g. 75). On a re-configure
# that cached default would look like a user's -DCMAKE_CUDA_ARCHITECTURES; drop it so the set below
# is resolved again (gannet_resolve_cuda_archs remembers which value was CMake's default).
if(DEFINED CACHE{CMAKE_CUDA_ARCHITECTURES} AND DEFINED CACHE{GANNET_CUDA_ARCHS_CMAKE_DEFAULT}
   AND "$CACHE{CMAKE_CUDA_ARCHITECTURES}" STREQUAL "$CACHE{GANNET_CUDA_ARCHS_CMAKE_DEFAULT}")
  unset(CMAKE_CUDA_ARCHITECTURES CACHE)
endif()

set(GANNET_CUDA_ARCH_SET "dev" CACHE STRING "CUDA architecture set: dev or release")
set_property(CACHE GANNET_CUDA_ARCH_SET PROPERTY STRINGS dev release)

set(GANNET_CUDA_ARCHS_DEV "90")
set(GANNET_CUDA_ARCHS_RELEASE "75;80;86;89;90;100")

function(gannet_resolve_cuda_archs out_var)
  if(DEFINED CACHE{CMAKE_CUDA_ARCHITECTURES})
    set(GANNET_CUDA_ARCHS_CMAKE_DEFAULT "$CACHE{CMAKE_CUDA_ARCHITECTURES}" CACHE INTERNAL
        "the arch list enable_language(CUDA) cached by default")
  endif()
  if(GANNET_CUDA_ARCH_SET STREQUAL "dev")
    set(archs ${GANNET_CUDA_ARCHS_DEV})
  elseif(GANNET_CUDA_ARCH_SET STREQUAL "release")
    set(archs ${GANNET_CUDA_ARCHS_RELEASE})
    if(CMAKE_CUDA_COMPILER_VERSION VERSION_LESS 13.0)
      list(PREPEND archs 70)
    endif()
  else()
    message(FATAL_ERROR "GANNET_CUDA_ARCH_SET must be dev or release, got '${GANNET_CUDA_ARCH_SET}'")
  endif()
  set(${out_var} "${archs}" PARENT_SCOPE)
endfunction()

# gannet_export_cuda_archs(target): defines GANNET_COMPILED_CUDA_ARCHS="75,80,..." (the list the
# build actually compiles for, after any -DCMAKE_CUDA_ARCHITECTURES override) for the target's
# sources; the kernel registry reports it and clamps devices to it.
function(gannet_export_cuda_archs target)
  string(REPLACE ";" "," _archs "${CMAKE_CUDA_ARCHITECTURES}")
  target_compile_definitions(${target} PRIVATE GANNET_COMPILED_CUDA_ARCHS="${_archs}")
endfunction()
