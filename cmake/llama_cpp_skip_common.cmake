# Included right after llama.cpp's project() call (CMAKE_PROJECT_llama.cpp_INCLUDE, set by the
# Makefile) when llama-cpp-python is compiled. llama-cpp-python forces LLAMA_BUILD_COMMON on for
# its multimodal (mtmd) library, which CAPA does not build (LLAVA_BUILD=OFF); the Python bindings
# load only libllama and ggml. Turning it off here skips llama.cpp's "common" helpers and the
# HTTP library they pull in: about half of the compile.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
