# anvil's own CPU kernels, built again per instruction set for a portable
# build (Note [One kernel source, a build per instruction set] in
# src/backends/cpu/isa.h). Included after the anvil target is defined.
include_guard(GLOBAL)

# The sources that hold kernels and nothing else: each is compiled into the
# library with its flags (the "default" build) and once per ANVIL_CPU_ISAS entry.
set(ANVIL_CPU_KERNEL_SOURCES
    src/backends/cpu/cpu_elementwise.cpp src/backends/cpu/cpu_reduce.cpp src/backends/cpu/cpu_window.cpp
    src/backends/cpu/cpu_norm.cpp src/backends/cpu/cpu_optim.cpp src/backends/cpu/cpu_kernel_table.cpp)

# auto: none under ANVIL_NATIVE (the library's own -march=native is the one
# build), avx2 and avx512 otherwise, on x86-64.
set(ANVIL_CPU_ISAS "auto" CACHE STRING "Extra builds of the CPU kernels: auto, or a list of avx2 and avx512")
set(anvil_cpu_isas ${ANVIL_CPU_ISAS})
if(anvil_cpu_isas STREQUAL "auto")
  set(anvil_cpu_isas "")
  if(NOT ANVIL_NATIVE AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
    set(anvil_cpu_isas avx2 avx512)
  endif()
endif()

set(anvil_cpu_isa_flags_avx2 -march=x86-64-v3)
# 256-bit vectors as the avx2 build: `omp simd reduction` loops (cpu_reduce.cpp,
# cpu_norm.cpp) add in as many lanes as a vector holds, and 512-bit ones gave
# other bits (f64 norm 24 ulp, batch norm's gradient 8 ulp apart); AVX-512's
# masks, 32 registers and instructions stay. The elementwise loops, where no
# lane's result depends on another's, take 512 (CMakeLists.txt, Note
# [Vectorised elementwise loops]).
set(anvil_cpu_isa_flags_avx512 -march=x86-64-v4 -mprefer-vector-width=256)
# Static archives, linked lowest first: they follow the library's own
# objects on the link line, and the linker keeps the first copy of what the
# builds share (libstdc++'s inline code), so the library's own wins, then
# avx2's. (Objects added with $<TARGET_OBJECTS> would come first.)
foreach(isa IN ITEMS avx2 avx512)
  if(NOT isa IN_LIST anvil_cpu_isas)
    continue()
  endif()
  add_library(anvil_cpu_${isa} STATIC ${ANVIL_CPU_KERNEL_SOURCES})
  target_include_directories(anvil_cpu_${isa} PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
  target_compile_definitions(anvil_cpu_${isa} PRIVATE ANVIL_CPU_ISA=isa_${isa})
  target_compile_options(anvil_cpu_${isa} PRIVATE -O3 -fno-math-errno ${anvil_cpu_isa_flags_${isa}})
  target_link_libraries(anvil_cpu_${isa} PRIVATE anvil_warnings OpenMP::OpenMP_CXX)
  target_link_libraries(anvil PRIVATE anvil_cpu_${isa})
  string(TOUPPER ${isa} upper)
  set_property(SOURCE src/backends/cpu/cpu_isa.cpp APPEND PROPERTY COMPILE_DEFINITIONS ANVIL_CPU_HAS_${upper}=1)
endforeach()
