# Dependencies come from Debian packages (scripts/install-deps.sh installs them).
find_package(OpenMP REQUIRED)
find_package(ZLIB REQUIRED)
find_package(Threads REQUIRED)

# OpenBLAS built on OpenMP, so anvil's parallel loops and BLAS share one
# thread pool and never oversubscribe the cores (see Note [One thread pool]
# in src/backends/cpu/parallel.h). Debian installs it beside the pthread
# build without changing the system's default BLAS.
find_library(ANVIL_OPENBLAS_OPENMP NAMES openblas
             PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp NO_DEFAULT_PATH)
find_path(ANVIL_CBLAS_INCLUDE cblas.h
          PATHS /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp NO_DEFAULT_PATH)
if(NOT ANVIL_OPENBLAS_OPENMP OR NOT ANVIL_CBLAS_INCLUDE)
  message(FATAL_ERROR "anvil needs OpenBLAS built with OpenMP: apt-get install libopenblas-openmp-dev "
                      "(or run scripts/install-deps.sh)")
endif()
add_library(anvil_blas INTERFACE)
target_link_libraries(anvil_blas INTERFACE ${ANVIL_OPENBLAS_OPENMP})
target_include_directories(anvil_blas SYSTEM INTERFACE ${ANVIL_CBLAS_INCLUDE})

# oneDNN: the CPU backend's convolution (Note [oneDNN convolution in the CPU
# backend], src/backends/cpu/cpu_conv.cpp). Debian's OpenMP build, on the same
# libgomp pool as anvil and OpenBLAS. anvil links the library itself, not
# Debian's DNNL::dnnl target, whose interface also links the OpenCL loader
# into whatever uses it (libdnnl.so.2 loads that loader for itself).
find_package(dnnl CONFIG QUIET)
if(TARGET DNNL::dnnl)
  get_target_property(ANVIL_DNNL_INCLUDE DNNL::dnnl INTERFACE_INCLUDE_DIRECTORIES)
  set(ANVIL_DNNL_LIBRARY $<TARGET_FILE:DNNL::dnnl>)
else()
  find_library(ANVIL_DNNL_LIBRARY NAMES dnnl)
  find_path(ANVIL_DNNL_INCLUDE oneapi/dnnl/dnnl.hpp)
endif()
if(NOT ANVIL_DNNL_LIBRARY OR NOT ANVIL_DNNL_INCLUDE)
  message(FATAL_ERROR "anvil needs oneDNN for CPU convolution: apt-get install libdnnl-dev "
                      "(or run scripts/install-deps.sh)")
endif()
add_library(anvil_dnnl INTERFACE)
target_link_libraries(anvil_dnnl INTERFACE ${ANVIL_DNNL_LIBRARY})
target_include_directories(anvil_dnnl SYSTEM INTERFACE ${ANVIL_DNNL_INCLUDE})

# libxsmm: JIT-generated kernels for small GEMMs, which beat OpenBLAS below
# the crossover in Note [libxsmm for small GEMMs] (src/backends/cpu/
# cpu_gemm.cpp). Debian ships only the static library, built with -fPIC;
# its own BLAS fallback (sgemm_/dgemm_) resolves to the OpenBLAS above.
find_path(ANVIL_XSMM_INCLUDE libxsmm.h)
find_library(ANVIL_XSMM_LIBRARY NAMES libxsmm.a xsmm)
if(NOT ANVIL_XSMM_INCLUDE OR NOT ANVIL_XSMM_LIBRARY)
  message(FATAL_ERROR "anvil needs libxsmm for small matrix products: apt-get install libxsmm-dev "
                      "(or run scripts/install-deps.sh)")
endif()
add_library(anvil_xsmm INTERFACE)
target_link_libraries(anvil_xsmm INTERFACE ${ANVIL_XSMM_LIBRARY} anvil_blas Threads::Threads ${CMAKE_DL_LIBS} rt m)
target_include_directories(anvil_xsmm SYSTEM INTERFACE ${ANVIL_XSMM_INCLUDE})
