# The parts of the device backends that are written once (DESIGN §2): the
# kernel sources of src/kernels, embedded as string literals and compiled
# per device at run time, the kernel requests (kernel_specs.cpp) and the
# primitives over them (device_primitives.*). Built once, as
# libanvil_device_common, which every device backend module links: one copy
# of the shared code and its state however many modules a program loads.
# It needs no GPU runtime. Included by every device backend's CMakeLists.
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
file(GLOB _common_sources CONFIGURE_DEPENDS ${_common}/*.cpp)
add_library(anvil_device_common SHARED ${_common_sources} ${_embedded})
target_link_libraries(anvil_device_common PUBLIC anvil PRIVATE anvil_warnings)
target_include_directories(anvil_device_common PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_compile_options(anvil_device_common PRIVATE -O3 $<$<BOOL:${ANVIL_NATIVE}>:-march=native> -fno-math-errno)
anvil_library_layout(anvil_device_common)
install(TARGETS anvil_device_common LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
