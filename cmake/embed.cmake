# Embeds a text file into C as a NUL-terminated array, so pages and scripts stay editable as
# their own files while the program ships them inside the binary.
#   cmake -DIN=file.html -DOUT=file.c -DNAME=symbol -P cmake/embed.cmake
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)"
       "\\1\n" bytes "${bytes}")
get_filename_component(src "${IN}" NAME)
file(WRITE "${OUT}.tmp"
     "/* Generated from ${src} by cmake/embed.cmake; edit that file instead. */\n"
     "const char ${NAME}[] = {\n${bytes}0x00};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
