# Sanitizer and fuzzing builds (scripts/fuzz.sh, scripts/sanitize-thread.sh).
#
# TRACEML_SANITIZE: a comma-separated list of address, undefined and thread
# (thread alone). Every target we own, from here on down (library, CLI, tests,
# benchmarks, fuzz targets), is compiled and linked with it, so that an error
# in the library shows in whichever test reaches it. Undefined behaviour aborts
# instead of printing and going on, so that it fails the test that hit it.
#
# TRACEML_FUZZ: the libFuzzer targets fuzz_* of tests/fuzz/, one per input
# boundary. libFuzzer is a clang feature; the library is compiled with
# coverage instrumentation (traceml_fuzz_instrument) so that the fuzzer sees
# which branches of the decoders an input reached. Combine it with
# TRACEML_SANITIZE=address,undefined: one build then gives the sanitized unit
# tests and the fuzz targets.
set(TRACEML_SANITIZE "" CACHE STRING
    "Sanitizers for every traceml target: address, undefined, address,undefined or thread; empty for none")
option(TRACEML_FUZZ "Build the libFuzzer targets fuzz_* of tests/fuzz/ (needs clang)" OFF)

set(TRACEML_SANITIZERS)
if(TRACEML_SANITIZE)
  string(REPLACE "," ";" TRACEML_SANITIZERS "${TRACEML_SANITIZE}")
  list(TRANSFORM TRACEML_SANITIZERS STRIP)
  list(REMOVE_DUPLICATES TRACEML_SANITIZERS)
  foreach(sanitizer IN LISTS TRACEML_SANITIZERS)
    if(NOT sanitizer MATCHES "^(address|undefined|thread)$")
      message(FATAL_ERROR "TRACEML_SANITIZE: unknown sanitizer '${sanitizer}' in '${TRACEML_SANITIZE}'; "
                          "use address, undefined, address,undefined or thread")
    endif()
  endforeach()
  # TSan and ASan both own the process's shadow memory: they cannot share it.
  if("thread" IN_LIST TRACEML_SANITIZERS AND NOT TRACEML_SANITIZERS STREQUAL "thread")
    message(FATAL_ERROR "TRACEML_SANITIZE: thread cannot be combined with another sanitizer "
                        "('${TRACEML_SANITIZE}'); use a separate build directory for each")
  endif()
  list(JOIN TRACEML_SANITIZERS "," _traceml_sanitize_list)
  # Frame pointers make the sanitizers' stack traces (taken at every malloc
  # under ASan, at every access under TSan) fast and complete.
  add_compile_options(-fsanitize=${_traceml_sanitize_list} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${_traceml_sanitize_list})
  if("undefined" IN_LIST TRACEML_SANITIZERS)
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
  unset(_traceml_sanitize_list)
  message(STATUS "traceml: sanitizers ${TRACEML_SANITIZE} on every target")
endif()

if(TRACEML_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "TRACEML_FUZZ=ON needs clang's libFuzzer, but the C++ compiler is "
                        "${CMAKE_CXX_COMPILER_ID}: configure a fresh build directory with "
                        "CXX=clang++-14 (Debian: apt-get install clang-14 libfuzzer-14-dev)")
  endif()
  if("thread" IN_LIST TRACEML_SANITIZERS)
    message(FATAL_ERROR "TRACEML_FUZZ=ON cannot be combined with TRACEML_SANITIZE=thread: "
                        "fuzz with address,undefined instead")
  endif()
  message(STATUS "traceml: fuzz targets on (tests/fuzz/)")
endif()

# TRACEML_CORE_OPTIMIZATION: an optimization level for the library alone,
# after the build type's flags. The sanitizer scripts build the tests and the
# CLI at -O0, which halves their compile time, and the library at -O1, since
# the fuzzers and the sanitized tests spend their time there.
set(TRACEML_CORE_OPTIMIZATION "" CACHE STRING
    "Optimization flag for the library's modules only (-O0 ... -O3, -Os, -Og); empty: the build type's")

# TRACEML_TEST_OPTIMIZATION and TRACEML_EXAMPLE_OPTIMIZATION: the
# optimization (and debug-info) flags of the test executables and of the
# LibTorch examples, after the build type's. A test spends its time in the
# library (built at the build type's level), in child processes and sockets,
# not in its own code: -O0 compiles a test file 3x faster than -O2 -g (34 s ->
# 10 s for text_report_test.cpp). The examples' work is inside LibTorch, and
# LibTorch's headers make -g costly: -O1 -g1 compiles quickstart.cpp in 18 s
# instead of 29 s. Empty: the build type's flags. The benchmarks and the
# library keep the build type's level.
set(TRACEML_TEST_OPTIMIZATION "-O0" CACHE STRING
    "Optimization flags for the test executables (-O0 ... -O3, -Os, -Og, -g0 ... -g3); empty: the build type's")
set(TRACEML_EXAMPLE_OPTIMIZATION "-O1 -g1" CACHE STRING
    "Optimization flags for the LibTorch examples (-O0 ... -O3, -Os, -Og, -g0 ... -g3); empty: the build type's")
foreach(var IN ITEMS TRACEML_CORE_OPTIMIZATION TRACEML_TEST_OPTIMIZATION TRACEML_EXAMPLE_OPTIMIZATION)
  separate_arguments(${var} UNIX_COMMAND "${${var}}")
  foreach(flag IN LISTS ${var})
    if(NOT flag MATCHES "^-O[0-3sg]?$" AND NOT flag MATCHES "^-g[0-3]?$")
      message(FATAL_ERROR "${var}: '${flag}' is not an optimization or debug-info flag; use "
                          "-O0 -O1 -O2 -O3 -Os -Og and -g0 -g1 -g2 -g3, or leave it empty")
    endif()
  endforeach()
endforeach()

# traceml_instrument_library(target): TRACEML_CORE_OPTIMIZATION, and coverage
# instrumentation for the fuzzer when TRACEML_FUZZ is on. Executables that link
# `target` then need the coverage callbacks: a sanitizer runtime provides no-op
# ones, libFuzzer the real ones, and -fsanitize=fuzzer-no-link at link time
# supplies them otherwise. Kept out of the installed package (BUILD_INTERFACE).
function(traceml_instrument_library target)
  if(TRACEML_CORE_OPTIMIZATION)
    target_compile_options(${target} PRIVATE ${TRACEML_CORE_OPTIMIZATION})
  endif()
  if(TRACEML_FUZZ)
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
    target_link_options(${target} INTERFACE $<BUILD_INTERFACE:-fsanitize=fuzzer-no-link>)
  endif()
endfunction()
