# System dependencies. Everything comes from the distribution (Debian: libabsl-dev, libfmt-dev,
# nlohmann-json3-dev, libgtest-dev, libbenchmark-dev); CUDA is optional and detected by the top-level file.

find_package(absl REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)  # nlohmann-json3-dev: the one JSON library
find_package(Threads REQUIRED)

if(GANNET_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(GANNET_BUILD_BENCH)
  find_package(benchmark QUIET)
  if(NOT benchmark_FOUND)
    message(STATUS "gannet: Google Benchmark not found, benchmarks disabled")
    set(GANNET_BUILD_BENCH OFF)
  endif()
endif()

if(GANNET_HAVE_CUDA)
  find_package(CUDAToolkit REQUIRED)
  # NCCL has no CMake package; it ships with the CUDA toolkit image or a distro package.
  # GANNET_WITH_NCCL=OFF leaves it out (the sm_70 build: the system's NCCL is CUDA 13's).
  option(GANNET_WITH_NCCL "Use NCCL for tensor parallelism when it is found" ON)
  if(NOT GANNET_WITH_NCCL)
    set(GANNET_NCCL_INCLUDE_DIR "" CACHE PATH "" FORCE)
    set(GANNET_NCCL_LIBRARY "" CACHE FILEPATH "" FORCE)
  endif()
  find_path(GANNET_NCCL_INCLUDE_DIR nccl.h
            HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include /usr/local/include)
  find_library(GANNET_NCCL_LIBRARY nccl
               HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu /usr/local/lib)
  if(GANNET_NCCL_INCLUDE_DIR AND GANNET_NCCL_LIBRARY)
    set(GANNET_HAVE_NCCL ON)
    add_library(gannet_nccl INTERFACE)
    target_include_directories(gannet_nccl INTERFACE ${GANNET_NCCL_INCLUDE_DIR})
    target_link_libraries(gannet_nccl INTERFACE ${GANNET_NCCL_LIBRARY})
  else()
    set(GANNET_HAVE_NCCL OFF)
    message(STATUS "gannet: NCCL not found, tensor parallelism over NCCL disabled")
  endif()
endif()
