# Where anvil's libraries, backend modules and tools sit, in the build tree
# and installed, and how each finds the others: by RUNPATH relative to
# itself ($ORIGIN), so an install to any prefix runs without LD_LIBRARY_PATH.
# Link directories outside the build (OpenBLAS's OpenMP build, the CUDA
# toolkit) stay in the installed RUNPATH as absolute paths.
include_guard(GLOBAL)

file(RELATIVE_PATH ANVIL_BIN_TO_LIB ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})

# A shared library or backend module: built next to libanvil.so (where the
# registry looks for modules, see Note [Backend modules]) and installed to
# the library directory, finding its siblings through $ORIGIN.
function(anvil_library_layout target)
  set_target_properties(${target} PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}
    INSTALL_RPATH "$ORIGIN"
    INSTALL_RPATH_USE_LINK_PATH TRUE)
endfunction()

# An installed program: finds the libraries in ../lib (or wherever
# CMAKE_INSTALL_LIBDIR puts them, relative to CMAKE_INSTALL_BINDIR).
function(anvil_tool_layout target)
  set_target_properties(${target} PROPERTIES
    INSTALL_RPATH "$ORIGIN/${ANVIL_BIN_TO_LIB}"
    INSTALL_RPATH_USE_LINK_PATH TRUE)
endfunction()

# A device backend as a loadable module, libanvil_backend_<name>.so
# (Note [Backend modules]): the folder's sources,
# linked against the core and the shared device code. Tests and tools that
# use the backend's internals link the target directly. Tells the registry
# (and, through ANVIL_WITH_<NAME>, tests and tools) that the backend is built.
function(anvil_backend_module name)
  string(TOUPPER ${name} upper)
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  set(target anvil_backend_${name})
  add_library(${target} SHARED ${sources})
  target_link_libraries(${target} PUBLIC anvil anvil_device_common PRIVATE anvil_warnings)
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  # The flags the core is built with (they were one library before).
  target_compile_options(${target} PRIVATE -O3 $<$<BOOL:${ANVIL_NATIVE}>:-march=native> -fno-math-errno)
  anvil_library_layout(${target})
  install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  # The entry points (module.cpp) report the interface they were built against.
  set_property(SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/module.cpp APPEND PROPERTY COMPILE_DEFINITIONS
               "ANVIL_BACKEND_ABI=\"${ANVIL_BACKEND_ABI}\"")
  # Only the registry needs to know, so only it recompiles.
  set_property(SOURCE ${PROJECT_SOURCE_DIR}/src/core/registry.cpp DIRECTORY ${PROJECT_SOURCE_DIR}
               APPEND PROPERTY COMPILE_DEFINITIONS ANVIL_HAVE_${upper}=1)
  target_compile_definitions(anvil INTERFACE ANVIL_WITH_${upper}=1)
  set_property(GLOBAL APPEND PROPERTY ANVIL_BACKEND_MODULES ${target})
endfunction()
