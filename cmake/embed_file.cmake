# Writes OUT, a C++ source defining `const char NAME[]` (the bytes of IN, then a NUL) and
# `const size_t NAMESize` (without the NUL) in namespace ls::server, so that a file edited as
# itself (HTML) is served from the binary. Run as: cmake -DIN=... -DOUT=... -DNAME=... -P embed_file.cmake
file(READ "${IN}" hex HEX)
# Every byte as a \xNN escape, one string literal per line of the file (adjacent literals concatenate).
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "\\\\x\\1" bytes "${hex}")
string(REPLACE "\\x0a" "\\x0a\"\n    \"" bytes "${bytes}")
get_filename_component(name "${IN}" NAME)
file(WRITE "${OUT}"
  "// Generated from ${name} by cmake/embed_file.cmake: edit that file, not this one.\n"
  "#include <cstddef>\n\nnamespace ls::server {\n\n"
  "extern const char ${NAME}[] =\n    \"${bytes}\";\n"
  "extern const size_t ${NAME}Size = sizeof(${NAME}) - 1;\n\n}  // namespace ls::server\n")
