# CUDA is detected, not required. With the toolkit (12.5 or later: nvcc,
# CUPTI, cuBLAS and NCCL) the GPU parts build; without it, with an older one,
# or with -DPPSIM_CUDA=OFF, the project builds and tests as before. Sets PPSIM_HAVE_CUDA and, when NCCL is found,
# PPSIM_HAVE_NCCL with the imported target NCCL::nccl.
option(PPSIM_CUDA "Build the GPU parts when the CUDA toolkit is found" ON)
set(PPSIM_HAVE_CUDA OFF)
set(PPSIM_HAVE_NCCL OFF)
if(PPSIM_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit)
  endif()
endif()
# The green contexts reach the driver through cudaGetDriverEntryPointByVersion
# (CUDA 12.5 and later).
set(PPSIM_CUDA_MIN_VERSION 12.5)
if(PPSIM_CUDA AND CUDAToolkit_FOUND AND CUDAToolkit_VERSION VERSION_LESS PPSIM_CUDA_MIN_VERSION)
  message(STATUS "ppsim: CUDA ${CUDAToolkit_VERSION} is older than ${PPSIM_CUDA_MIN_VERSION}; "
                 "building without the GPU parts")
elseif(PPSIM_CUDA AND CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND AND TARGET CUDA::cupti)
  # Machine code for Turing (7.5), Ampere (8.0, which runs unchanged on 8.6
  # and 8.9: one binary serves a major version) and Hopper (9.0), and
  # Hopper's PTX, which the driver compiles for anything newer. CUDA 13
  # builds nothing older. Was 75 80 86 89 90, each with its PTX: the same
  # GPUs run, at twice the device compilation (issue 14, CI time).
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 75-real 80-real 90)
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)  # what CMake 3.25 knows for nvcc
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(PPSIM_HAVE_CUDA ON)
  # CUPTI and NCCL live outside the loader's default paths: the binaries
  # carry the toolkit's library folder.
  list(APPEND CMAKE_BUILD_RPATH ${CUDAToolkit_LIBRARY_DIR})
  list(APPEND CMAKE_INSTALL_RPATH ${CUDAToolkit_LIBRARY_DIR})
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    add_library(NCCL::nccl SHARED IMPORTED)
    set_target_properties(NCCL::nccl PROPERTIES IMPORTED_LOCATION ${NCCL_LIBRARY}
                                                INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
    set(PPSIM_HAVE_NCCL ON)
  endif()
  message(STATUS "ppsim: CUDA ${CUDAToolkit_VERSION} found (architectures "
                 "${CMAKE_CUDA_ARCHITECTURES}; NCCL: ${PPSIM_HAVE_NCCL}); building the GPU parts")
elseif(PPSIM_CUDA)
  message(STATUS "ppsim: no CUDA toolkit with CUPTI found; building without the GPU parts")
else()
  message(STATUS "ppsim: PPSIM_CUDA=OFF; building without the GPU parts")
endif()
