# The parts of the device backends that are written once (DESIGN §2): the
# kernel sources of src/kernels, embedded as string literals and compiled
# per device at run time, the kernel requests (kernel_specs.cpp) and the
# primitives over them (device_primitives.*). Included by every device
# backend's CMakeLists; added to the anvil target once.
include_guard(GLOBAL)

set(_common ${PROJECT_SOURCE_DIR}/src/backends/common)
file(GLOB ANVIL_KERNEL_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/kernels/*.kern
     ${PROJECT_SOURCE_DIR}/src/kernels/*.h)
set(_embedded ${PROJECT_BINARY_DIR}/src/backends/common/kernel_sources_embedded.cpp)
add_custom_command(
  OUTPUT ${_embedded}
  COMMAND ${CMAKE_COMMAND} -DOUTPUT=${_embedded} "-DSOURCES=${ANVIL_KERNEL_SOURCES}" -P ${_common}/embed_kernels.cmake
  DEPENDS ${ANVIL_KERNEL_SOURCES} ${_common}/embed_kernels.cmake
  COMMENT "Embedding the kernel sources of src/kernels"
  VERBATIM)
# The rule lives in the including directory, the anvil target in the top
# one: a target here runs it, and anvil depends on that target.
add_custom_target(anvil_device_kernels DEPENDS ${_embedded})
set_source_files_properties(${_embedded} PROPERTIES GENERATED TRUE)
add_dependencies(anvil anvil_device_kernels)
target_sources(anvil PRIVATE ${_common}/kernel_sources.cpp ${_common}/kernel_specs.cpp
                             ${_common}/device_primitives.cpp ${_common}/op_scope.cpp ${_embedded})
