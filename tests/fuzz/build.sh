#!/bin/sh
# tests/fuzz/build.sh - build the libFuzzer targets into build/fuzz/.
# Run from the repository root:  tests/fuzz/build.sh [target ...]
# (default: all targets).  Needs clang with libFuzzer (clang >= 6).
set -eu

if [ ! -f proto/ndjson.h ] || [ ! -d tests/fuzz ]; then
    echo "build.sh: run me from the repository root" >&2
    exit 2
fi

CC=${CC:-clang}
OUT=build/fuzz
TARGETS_ALL="fuzz_ndjson_rpc fuzz_chan fuzz_codec fuzz_bindings fuzz_limits fuzz_jsonpass fuzz_tools fuzz_pattern fuzz_luadiff"
TARGETS=${*:-$TARGETS_ALL}

PKG_CFLAGS=$(pkg-config --cflags lua5.3 jansson)
PKG_LIBS=$(pkg-config --libs lua5.3 jansson)
CFLAGS="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
-fno-omit-frame-pointer -std=c11 -D_GNU_SOURCE -DSANDBOXD_SANITIZE=1 -I. $PKG_CFLAGS \
-DRPC_PASS_MIN=16"     # lines above 16 bytes take the pass-through path (fuzz_ndjson_rpc)
LIBS="$PKG_LIBS -lm"

# The project sources each target links (proto/ and the worker's Lua
# codecs, not the rest of worker/: the unit tests, whose Lua setup the
# targets copy, use luaL_newstate+luaL_openlibs, not worker/luaenv.c; but
# fuzz_luadiff, which compares the worker's environment with stock Lua).
srcs_for() {
    case $1 in
    fuzz_ndjson_rpc) echo "proto/inbuf.c proto/ndjson.c proto/jsonrpc.c proto/jsonpass.c proto/utf8.c" ;;
    fuzz_jsonpass)   echo "proto/jsonpass.c worker/jsonbig.c proto/utf8.c" ;;
    fuzz_chan)       echo "proto/inbuf.c proto/chan.c" ;;
    fuzz_codec)      echo "proto/utf8.c worker/codec.c" ;;
    fuzz_bindings)   echo "proto/utf8.c proto/bindings.c proto/sort.c worker/bindings_lua.c" ;;
    fuzz_limits)     echo "policy/limits.c" ;;
    fuzz_tools)      echo "proto/tools.c proto/jsonrpc.c proto/jsonpass.c proto/utf8.c" ;;
    fuzz_pattern)    echo "worker/pattern.c" ;;
    fuzz_luadiff)    echo "tests/diff/luadiff.c worker/luaenv.c worker/luaenv_lib.c proto/chan.c proto/inbuf.c" \
                          worker/charge.c worker/pattern.c ;;     # the worker's environment itself
    *) echo "build.sh: unknown target $1" >&2; exit 2 ;;
    esac
}

mkdir -p "$OUT/obj/proto" "$OUT/obj/policy" "$OUT/obj/worker" "$OUT/obj/tests/diff"

ALL_SRCS=""
for t in $TARGETS; do
    ALL_SRCS="$ALL_SRCS $(srcs_for "$t")"
done
# Compile each needed project source once, with the fuzzing flags (always:
# there are few, and a stale object built from an edited header would lie).
for src in $(printf '%s\n' $ALL_SRCS | sort -u); do
    obj="$OUT/obj/${src%.c}.o"
    echo "CC  $src"
    # shellcheck disable=SC2086
    $CC $CFLAGS -c -o "$obj" "$src"
done

for t in $TARGETS; do
    objs=""
    for src in $(srcs_for "$t"); do
        objs="$objs $OUT/obj/${src%.c}.o"
    done
    echo "LD  $OUT/$t"
    # shellcheck disable=SC2086
    $CC $CFLAGS -o "$OUT/$t" "tests/fuzz/$t.c" $objs $LIBS
done
