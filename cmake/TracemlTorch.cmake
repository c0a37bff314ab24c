# LibTorch support: the header-only target traceml::torch (traceml/torch.hpp)
# and, through TRACEML_TORCH_FOUND, the examples.
#
# TRACEML_WITH_TORCH: AUTO (default) uses LibTorch when find_package(Torch)
# finds it and quietly skips it otherwise; ON requires it; OFF never looks.
# The core library never depends on LibTorch either way.
set(TRACEML_WITH_TORCH AUTO CACHE STRING "Build traceml::torch and the examples with LibTorch: AUTO, ON or OFF")
set_property(CACHE TRACEML_WITH_TORCH PROPERTY STRINGS AUTO ON OFF)

set(TRACEML_TORCH_FOUND OFF)
string(TOUPPER "${TRACEML_WITH_TORCH}" _traceml_with_torch)
if(_traceml_with_torch STREQUAL "AUTO")
  find_package(Torch QUIET)
  if(Torch_FOUND OR TORCH_FOUND)
    set(TRACEML_TORCH_FOUND ON)
  else()
    message(STATUS "traceml: LibTorch not found; traceml::torch and the examples are skipped "
                   "(set Torch_DIR or CMAKE_PREFIX_PATH to LibTorch's share/cmake/Torch to use it)")
  endif()
elseif(TRACEML_WITH_TORCH)
  find_package(Torch)
  if(NOT (Torch_FOUND OR TORCH_FOUND))
    message(FATAL_ERROR "traceml: TRACEML_WITH_TORCH=ON but LibTorch was not found: set Torch_DIR "
                        "or CMAKE_PREFIX_PATH to LibTorch's share/cmake/Torch, or -DTRACEML_WITH_TORCH=OFF")
  endif()
  set(TRACEML_TORCH_FOUND ON)
endif()
unset(_traceml_with_torch)

include(TracemlTorchCheck)
if(TRACEML_TORCH_FOUND)
  traceml_check_torch_libraries()
  message(STATUS "traceml: LibTorch ${Torch_VERSION} found; building traceml::torch")
  # Header-only: traceml/torch.hpp lives beside traceml.hpp, so the include
  # directory comes with traceml::traceml. LibTorch is linked by its imported
  # target `torch`, whose include directories CMake marks as system ones, so our
  # -Werror builds never see warnings from inside LibTorch's headers.
  add_library(traceml_torch INTERFACE)
  add_library(traceml::torch ALIAS traceml_torch)
  set_target_properties(traceml_torch PROPERTIES EXPORT_NAME torch)
  # traceml/torch.hpp calls c10_cuda (allocator statistics, current stream,
  # device guard) and the CUDA runtime (cudaMemGetInfo) directly when LibTorch
  # has CUDA: c10_cuda is named so that its symbols and its public torch::cudart
  # reach the linker whatever `torch` itself passes on.
  target_link_libraries(traceml_torch INTERFACE traceml::traceml torch
                                                $<$<TARGET_EXISTS:c10_cuda>:c10_cuda>)
  # Whether this LibTorch build has CUDA: a CPU-only LibTorch still ships the
  # c10/cuda headers, so the header cannot tell on its own. Evaluated where the
  # target is used, so an installed traceml::torch asks the consumer's LibTorch.
  target_compile_definitions(traceml_torch INTERFACE
    TRACEML_TORCH_CUDA=$<BOOL:$<TARGET_EXISTS:c10_cuda>>)
  # A pip wheel's NVIDIA folders for the linker (TracemlTorchCheck.cmake): in
  # this build only; the installed package adds the consumer's own.
  traceml_torch_wheel_link_options(wheel_link)
  if(wheel_link)
    target_link_options(traceml_torch INTERFACE "$<BUILD_INTERFACE:${wheel_link}>")
  endif()
endif()
