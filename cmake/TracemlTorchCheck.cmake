# Checks on the LibTorch that find_package(Torch) found, shared by traceml's
# own build (TracemlTorch.cmake) and the installed package, for a consumer's
# LibTorch (tracemlConfig.cmake; the examples built on their own use it).

# traceml_check_torch_libraries(): LibTorch's CMake package looks for its
# libraries in the default places before its own lib/ folder, so with a
# CMAKE_PREFIX_PATH that names only the pip wheel's torch/share/cmake, a
# machine that also has Debian's libtorch-dev links Debian's libtorch.so and
# libc10.so with the wheel's headers and libtorch_cuda.so; whether that runs
# depends on which library each symbol comes from at run time. Stops the
# configure with the fix instead.
function(traceml_check_torch_libraries)
  if(NOT TORCH_INSTALL_PREFIX)
    return()
  endif()
  foreach(var IN ITEMS TORCH_LIBRARY c10_LIBRARY C10_CUDA_LIBRARY)
    if(NOT ${var})
      continue()
    endif()
    get_filename_component(name "${${var}}" NAME)
    set(own "${TORCH_INSTALL_PREFIX}/lib/${name}")
    if(EXISTS "${own}")
      get_filename_component(found_real "${${var}}" REALPATH)
      get_filename_component(own_real "${own}" REALPATH)
      if(NOT found_real STREQUAL own_real)
        message(FATAL_ERROR
          "traceml: LibTorch ${Torch_VERSION} (${TORCH_INSTALL_PREFIX}) would link another LibTorch's "
          "${name} (${${var}}): put LibTorch's root, ${TORCH_INSTALL_PREFIX}, in CMAKE_PREFIX_PATH "
          "(not only its share/cmake), in a fresh build folder")
      endif()
    endif()
  endforeach()
endfunction()

# traceml_torch_wheel_link_options(out_var): a LibTorch from PyTorch's pip
# wheel finds NVIDIA's libraries (NCCL, cuDNN, ...) in the wheels beside it at
# run time (its RUNPATH); the linker, which checks libtorch_cuda.so's
# dependencies, looks first where the CUDA toolkit's folders point, and a
# toolkit older than the wheel's NCCL fails the link of any LibTorch program
# ("undefined reference to ncclSignal"). The options hand the wheels' folders
# to the linker first; empty for other LibTorches. traceml::torch carries
# them: in traceml's build (TracemlTorch.cmake) and, installed, for the
# consumer's own LibTorch (tracemlConfig.cmake).
function(traceml_torch_wheel_link_options out_var)
  set(options)
  if(TORCH_INSTALL_PREFIX)
    file(GLOB wheel_libs LIST_DIRECTORIES true "${TORCH_INSTALL_PREFIX}/../nvidia/*/lib")
    foreach(dir IN LISTS wheel_libs)
      if(IS_DIRECTORY "${dir}")
        get_filename_component(dir "${dir}" REALPATH)
        list(APPEND options "-Wl,-rpath-link,${dir}")
      endif()
    endforeach()
  endif()
  set(${out_var} "${options}" PARENT_SCOPE)
endfunction()
