# Installing and packaging libgannet for embedders:
#   include/gannet/gannet.h        the whole public ABI
#   lib/libgannet.so.MAJOR...      versioned; exports gannet_* only (lib/capi/gannet.map)
#   lib/libgannet.a                the whole engine in one archive (every internal static library)
#   lib/pkgconfig/gannet.pc        pkg-config: the shared library (`--static`: plus the system
#                                  libraries the archive needs, in Requires/Libs.private)
#   lib/pkgconfig/gannet-static.pc pkg-config: libgannet.a and those system libraries
#   lib/cmake/gannet/              find_package(gannet): gannet::gannet (shared) and
#                                  gannet::gannet_static (found when its dependencies are)
#   bin/gannet                     the CLI
# (lib is CMAKE_INSTALL_LIBDIR.) The dependencies of the static library are read from the link
# graph of the internal libraries, so a new library or dependency needs no change here.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Walks the link graph from `target`: our own static and object libraries are collected for bundling into
# libgannet.a (GLOBAL property GANNET_BUNDLED), our INTERFACE libraries are looked through, and
# everything else (imported targets, library names and paths) is an external dependency of the
# bundle (GANNET_EXTERNAL_DEPS), in first-seen order.
function(_gannet_walk_link_graph target)
  get_property(seen GLOBAL PROPERTY GANNET_WALKED)
  if(target IN_LIST seen)
    return()
  endif()
  set_property(GLOBAL APPEND PROPERTY GANNET_WALKED ${target})
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "STATIC_LIBRARY" OR type STREQUAL "OBJECT_LIBRARY")
    set_property(GLOBAL APPEND PROPERTY GANNET_BUNDLED ${target})
  endif()
  set(deps)
  foreach(prop LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
    get_target_property(value ${target} ${prop})
    if(value)
      list(APPEND deps ${value})
    endif()
  endforeach()
  foreach(dep IN LISTS deps)
    # A static library's private dependencies appear in its interface as $<LINK_ONLY:dep>.
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" dep "${dep}")
    if(dep MATCHES "^\\$<")
      message(FATAL_ERROR "gannet: cannot bundle ${target}: generator expression ${dep} in its "
                          "link libraries; teach cmake/GannetInstall.cmake about it")
    endif()
    if(TARGET ${dep})
      get_target_property(aliased ${dep} ALIASED_TARGET)
      if(aliased)
        set(dep ${aliased})
      endif()
      get_target_property(imported ${dep} IMPORTED)
      get_target_property(dep_type ${dep} TYPE)
      if(NOT imported AND dep_type MATCHES "^(STATIC|INTERFACE|OBJECT)_LIBRARY$")
        _gannet_walk_link_graph(${dep})
        continue()
      elseif(NOT imported)
        message(FATAL_ERROR "gannet: cannot bundle ${target}: it links ${dep} (${dep_type})")
      endif()
    endif()
    get_property(external GLOBAL PROPERTY GANNET_EXTERNAL_DEPS)
    if(NOT dep IN_LIST external)
      set_property(GLOBAL APPEND PROPERTY GANNET_EXTERNAL_DEPS ${dep})
    endif()
  endforeach()
endfunction()

set_property(GLOBAL PROPERTY GANNET_WALKED)
set_property(GLOBAL PROPERTY GANNET_BUNDLED)
set_property(GLOBAL PROPERTY GANNET_EXTERNAL_DEPS)
_gannet_walk_link_graph(gannet_capi_objs)
get_property(_gannet_bundled GLOBAL PROPERTY GANNET_BUNDLED)
get_property(_gannet_external GLOBAL PROPERTY GANNET_EXTERNAL_DEPS)

# The C++ runtime a C program needs when it links the archive (stdc++, m with GCC): what the C++
# compiler links implicitly beyond what the C compiler does.
set(_gannet_cxx_runtime ${CMAKE_CXX_IMPLICIT_LINK_LIBRARIES})
if(CMAKE_C_IMPLICIT_LINK_LIBRARIES)
  list(REMOVE_ITEM _gannet_cxx_runtime ${CMAKE_C_IMPLICIT_LINK_LIBRARIES})
endif()
list(REMOVE_DUPLICATES _gannet_cxx_runtime)

# libgannet.a: the objects of every internal library, next to libgannet.so in the build tree.
set(_gannet_objects)
foreach(lib IN LISTS _gannet_bundled)
  list(APPEND _gannet_objects $<TARGET_OBJECTS:${lib}>)
endforeach()
add_library(gannet_static STATIC ${_gannet_objects})
add_dependencies(gannet_static ${_gannet_bundled})
set_target_properties(gannet_static PROPERTIES
  OUTPUT_NAME gannet
  LINKER_LANGUAGE CXX
  ARCHIVE_OUTPUT_DIRECTORY $<TARGET_FILE_DIR:gannet>
  EXPORT_NAME gannet_static)
target_include_directories(gannet_static PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                                $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(gannet_static INTERFACE ${_gannet_external} ${_gannet_cxx_runtime})

# pkg-config: absl and fmt have .pc files of their own; the rest become linker flags.
set(_pc_requires)
set(_pc_libs)
foreach(dep IN LISTS _gannet_external)
  if(dep MATCHES "^absl::(.+)$")
    list(APPEND _pc_requires "absl_${CMAKE_MATCH_1}")
  elseif(dep STREQUAL "fmt::fmt" OR dep STREQUAL "fmt::fmt-header-only")
    list(APPEND _pc_requires fmt)
  elseif(dep STREQUAL "Threads::Threads")
    list(APPEND _pc_libs -pthread)
  elseif(dep MATCHES "^CUDA::(.+)$")
    # With an rpath: the Volta build's CUDA 12 toolkit is not in the loader's folders.
    list(APPEND _pc_libs "-L${CUDAToolkit_LIBRARY_DIR}" "-Wl,-rpath,${CUDAToolkit_LIBRARY_DIR}"
         "-l${CMAKE_MATCH_1}")
  elseif(IS_ABSOLUTE "${dep}")
    get_filename_component(_dir "${dep}" DIRECTORY)
    get_filename_component(_name "${dep}" NAME_WE)
    string(REGEX REPLACE "^lib" "" _name "${_name}")
    list(APPEND _pc_libs "-L${_dir}" "-l${_name}")
  elseif(TARGET ${dep})
    message(WARNING "gannet: gannet.pc does not list ${dep}; add it to cmake/GannetInstall.cmake")
  else()
    list(APPEND _pc_libs "-l${dep}")
  endif()
endforeach()
foreach(lib IN LISTS _gannet_cxx_runtime)
  list(APPEND _pc_libs "-l${lib}")
endforeach()
list(REMOVE_DUPLICATES _pc_requires)
list(REMOVE_DUPLICATES _pc_libs)
string(REPLACE ";" " " GANNET_PC_REQUIRES_PRIVATE "${_pc_requires}")
string(REPLACE ";" " " GANNET_PC_LIBS_PRIVATE "${_pc_libs}")
# Relocatable: the prefix is found from the .pc file's own folder, so `cmake --install --prefix`
# works whatever CMAKE_INSTALL_PREFIX was at configure time.
file(RELATIVE_PATH GANNET_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" GANNET_PC_TO_PREFIX "${GANNET_PC_TO_PREFIX}")
# gannet.pc is for the shared library, which carries its C++ dependencies inside: it requires
# nothing, so a C program builds against it where abseil's and fmt's .pc files are absent. Its
# Libs carry the run path of the installed library, so a program linked through it (C, Go's cgo,
# a Rust build script) starts without LD_LIBRARY_PATH or ldconfig wherever the prefix is.
# gannet-static.pc names the archive itself (beside libgannet.so `-lgannet` would pick the shared
# library) and requires what the archive needs: `cc app.c $(pkg-config --cflags --libs
# gannet-static)`.
file(WRITE ${PROJECT_BINARY_DIR}/gannet.pc.in [=[
prefix=${pcfiledir}/@GANNET_PC_TO_PREFIX@
exec_prefix=${prefix}
libdir=${prefix}/@CMAKE_INSTALL_LIBDIR@
includedir=${prefix}/@CMAKE_INSTALL_INCLUDEDIR@

Name: gannet
Description: @PROJECT_DESCRIPTION@ (C ABI)
Version: @PROJECT_VERSION@
Libs: -L${libdir} -Wl,-rpath,${libdir} -lgannet
Cflags: -I${includedir}
]=])
file(WRITE ${PROJECT_BINARY_DIR}/gannet-static.pc.in [=[
prefix=${pcfiledir}/@GANNET_PC_TO_PREFIX@
exec_prefix=${prefix}
libdir=${prefix}/@CMAKE_INSTALL_LIBDIR@
includedir=${prefix}/@CMAKE_INSTALL_INCLUDEDIR@

Name: gannet-static
Description: @PROJECT_DESCRIPTION@ (C ABI), linked statically
Version: @PROJECT_VERSION@
Requires: @GANNET_PC_REQUIRES_PRIVATE@
Libs: ${libdir}/libgannet.a @GANNET_PC_LIBS_PRIVATE@
Cflags: -I${includedir}
]=])
foreach(_pc gannet gannet-static)
  configure_file(${PROJECT_BINARY_DIR}/${_pc}.pc.in ${PROJECT_BINARY_DIR}/${_pc}.pc @ONLY)
endforeach()

# CMake package: gannet::gannet always; gannet::gannet_static when its dependencies are found.
set(GANNET_STATIC_DEPENDENCIES)
foreach(dep IN LISTS _gannet_external)
  if(dep MATCHES "^absl::")
    list(APPEND GANNET_STATIC_DEPENDENCIES absl)
  elseif(dep MATCHES "^fmt::")
    list(APPEND GANNET_STATIC_DEPENDENCIES fmt)
  elseif(dep STREQUAL "Threads::Threads")
    list(APPEND GANNET_STATIC_DEPENDENCIES Threads)
  elseif(dep MATCHES "^CUDA::")
    list(APPEND GANNET_STATIC_DEPENDENCIES CUDAToolkit)
  endif()
endforeach()
list(REMOVE_DUPLICATES GANNET_STATIC_DEPENDENCIES)
# The toolkit libgannet.a was built against, which a consumer's find_package(CUDAToolkit) should
# find unless told otherwise (the Volta build's CUDA 12 is not the system's CUDA 13).
set(GANNET_CUDA_TOOLKIT_ROOT "")
if(GANNET_HAVE_CUDA AND CUDAToolkit_BIN_DIR)
  get_filename_component(GANNET_CUDA_TOOLKIT_ROOT "${CUDAToolkit_BIN_DIR}" DIRECTORY)
endif()
set(_gannet_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/gannet)
file(WRITE ${PROJECT_BINARY_DIR}/gannetConfig.cmake.in [=[
# find_package(gannet [COMPONENTS static]): gannet::gannet links libgannet.so;
# gannet::gannet_static links libgannet.a and the libraries the engine needs
# (@GANNET_STATIC_DEPENDENCIES@), so it is defined only when those are found.
@PACKAGE_INIT@

include("${CMAKE_CURRENT_LIST_DIR}/gannetTargets.cmake")
set(gannet_shared_FOUND TRUE)

set(gannet_static_FOUND TRUE)
if(NOT DEFINED CUDAToolkit_ROOT AND NOT DEFINED ENV{CUDAToolkit_ROOT} AND
   EXISTS "@GANNET_CUDA_TOOLKIT_ROOT@/bin")
  set(CUDAToolkit_ROOT "@GANNET_CUDA_TOOLKIT_ROOT@")
endif()
foreach(_gannet_dep IN ITEMS @GANNET_STATIC_DEPENDENCIES@)
  find_package(${_gannet_dep} QUIET)
  if(NOT ${_gannet_dep}_FOUND)
    set(gannet_static_FOUND FALSE)
    set(gannet_static_NOT_FOUND_MESSAGE "gannet::gannet_static needs ${_gannet_dep}")
  endif()
endforeach()
if(gannet_static_FOUND)
  include("${CMAKE_CURRENT_LIST_DIR}/gannetStaticTargets.cmake")
endif()
check_required_components(gannet)
]=])
configure_package_config_file(${PROJECT_BINARY_DIR}/gannetConfig.cmake.in
  ${PROJECT_BINARY_DIR}/gannetConfig.cmake INSTALL_DESTINATION ${_gannet_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gannetConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)  # 0.x: minors break the ABI

install(FILES ${PROJECT_SOURCE_DIR}/include/gannet/gannet.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gannet)
# The installed library keeps finding dependencies outside the system folders (the CUDA toolkit's).
set_target_properties(gannet PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
# CMake leaves out link folders inside the project, which is where the Volta build's CUDA 12
# toolkit lives (.cuda12/, tools/sm70): name the toolkit's library folder explicitly.
if(GANNET_HAVE_CUDA AND CUDAToolkit_LIBRARY_DIR)
  set_property(TARGET gannet APPEND PROPERTY INSTALL_RPATH "${CUDAToolkit_LIBRARY_DIR}")
endif()
install(TARGETS gannet EXPORT gannetTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS gannet_static EXPORT gannetStaticTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT gannetTargets NAMESPACE gannet:: DESTINATION ${_gannet_cmake_dir})
install(EXPORT gannetStaticTargets NAMESPACE gannet:: DESTINATION ${_gannet_cmake_dir})
install(FILES ${PROJECT_BINARY_DIR}/gannetConfig.cmake ${PROJECT_BINARY_DIR}/gannetConfigVersion.cmake
        DESTINATION ${_gannet_cmake_dir})
install(FILES ${PROJECT_BINARY_DIR}/gannet.pc ${PROJECT_BINARY_DIR}/gannet-static.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(TARGET gannet_cli)
  # The installed CLI finds the installed library wherever the prefix is.
  file(RELATIVE_PATH _gannet_bin_to_lib "/prefix/${CMAKE_INSTALL_BINDIR}"
       "/prefix/${CMAKE_INSTALL_LIBDIR}")
  set_target_properties(gannet_cli PROPERTIES INSTALL_RPATH "$ORIGIN/${_gannet_bin_to_lib}")
  install(TARGETS gannet_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
message(STATUS "gannet: libgannet.a bundles ${_gannet_bundled}")
