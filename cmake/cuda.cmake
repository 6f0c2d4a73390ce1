# The CUDA backend (cuda/*.cu), included by CMakeLists.txt.
#
# SPECGEN_CUDA: ON (required: fails without nvcc), OFF, or AUTO (default: on when check_language
# finds a CUDA compiler). When on: the kernels are compiled for CMAKE_CUDA_ARCHITECTURES (default
# "80;90": SASS for Ampere and Hopper plus PTX that newer GPUs JIT-compile), their objects are linked
# into specgen_core with the static CUDA runtime (the wheel needs only the NVIDIA driver at run
# time), and specgen_core gets SPECGEN_WITH_CUDA=1.

string(TOUPPER "${SPECGEN_CUDA}" _specgen_cuda_mode)
if(_specgen_cuda_mode STREQUAL "AUTO")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(_specgen_cuda_on ON)
  else()
    set(_specgen_cuda_on OFF)
    message(STATUS "specgen: CUDA backend off (SPECGEN_CUDA=AUTO and no CUDA compiler was found)")
  endif()
elseif(_specgen_cuda_mode MATCHES "^(ON|TRUE|YES|Y|1)$")
  set(_specgen_cuda_on ON)
elseif(_specgen_cuda_mode MATCHES "^(OFF|FALSE|NO|N|0|)$")
  set(_specgen_cuda_on OFF)
else()
  message(FATAL_ERROR "SPECGEN_CUDA must be ON, OFF or AUTO, got '${SPECGEN_CUDA}'")
endif()

if(NOT _specgen_cuda_on)
  return()
endif()

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  set(CMAKE_CUDA_ARCHITECTURES "80;90")
endif()
set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
if(NOT TARGET CUDA::cudart_static)
  message(FATAL_ERROR "specgen: the CUDA toolkit at ${CUDAToolkit_LIBRARY_DIR} has no static runtime (libcudart_static.a)")
endif()

file(GLOB SPECGEN_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cuda/*.cu)
add_library(specgen_cuda OBJECT ${SPECGEN_CUDA_SOURCES})
set_target_properties(specgen_cuda PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
                                              POSITION_INDEPENDENT_CODE ON)
target_include_directories(specgen_cuda PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/cpp/src ${CMAKE_CURRENT_SOURCE_DIR}/cuda)
target_compile_definitions(specgen_cuda PRIVATE SPECGEN_WITH_CUDA=1)
# No fast math: expf/tanhf/division stay IEEE-accurate so GPU logits track the CPU's closely.
target_compile_options(specgen_cuda PRIVATE -Xcompiler=-Wall -Xcompiler=-Wno-unused-parameter)

target_sources(specgen_core PRIVATE $<TARGET_OBJECTS:specgen_cuda>)
target_compile_definitions(specgen_core PUBLIC SPECGEN_WITH_CUDA=1)
target_link_libraries(specgen_core PUBLIC CUDA::cudart_static)
message(STATUS "specgen: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
