# Included into llama-cpp-python's CMake project (CMAKE_PROJECT_llama_cpp_INCLUDE) by the
# bundle build.
#
# With GGML_BACKEND_DL and GGML_CPU_ALL_VARIANTS, llama.cpp compiles its CPU backend once per
# x86 instruction-set level (x64, sse42, haswell, skylakex, icelake, zen4, ...) as libraries
# ggml-cpu-<variant>, and picks the best one the running CPU supports when it starts.
# llama-cpp-python installs a fixed list of targets into its wheel, and those variants are not
# on it: this adds them, once every target exists (at the end of the top-level directory),
# beside libggml-base.so which they link against (hence the $ORIGIN run path).
function(crag_edge_install_cpu_variants)
    get_property(targets DIRECTORY vendor/llama.cpp/ggml/src PROPERTY BUILDSYSTEM_TARGETS)
    set(variants "")
    foreach(target IN LISTS targets)
        get_target_property(kind ${target} TYPE)
        if(target MATCHES "^ggml-cpu-" AND kind MATCHES "^(MODULE|SHARED)_LIBRARY$")
            list(APPEND variants ${target})
        endif()
    endforeach()
    if(NOT variants)
        message(FATAL_ERROR "no ggml-cpu-<variant> targets: build with GGML_BACKEND_DL=ON and GGML_CPU_ALL_VARIANTS=ON")
    endif()
    message(STATUS "crag-edge bundle: installing CPU variants ${variants}")
    set_target_properties(${variants} PROPERTIES INSTALL_RPATH "$ORIGIN" BUILD_WITH_INSTALL_RPATH TRUE)
    install(TARGETS ${variants}
        LIBRARY DESTINATION ${SKBUILD_PLATLIB_DIR}/llama_cpp/lib
        RUNTIME DESTINATION ${SKBUILD_PLATLIB_DIR}/llama_cpp/lib)
endfunction()

cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL crag_edge_install_cpu_variants)
