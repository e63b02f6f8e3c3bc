#!/usr/bin/env bash
# The install test: installs this build tree to a temporary prefix and uses it only from
# there, as a user would, with no LD_LIBRARY_PATH: the streamrt tool, the Python package, a CMake
# consumer and a pkg-config consumer. Then it moves the prefix (copies the tree elsewhere, deletes
# the original) and does it all again: nothing may point back to the first place.
# Usage: install_test.sh BUILD_DIR WORK_DIR APP_DIR. What was built (tool, Python package, where
# the package installs, the compiler) is read from BUILD_DIR's CMake cache.
set -euo pipefail
build_dir=$1 work=$2 app_dir=$3

cache() { sed -n "s/^$1:[A-Z]*=//p" "$build_dir/CMakeCache.txt"; }
cxx=$(cache CMAKE_CXX_COMPILER) generator=$(cache CMAKE_GENERATOR)
have_tool=$(cache STREAMRT_BUILD_TOOLS) python="" py_site_rel=""
if [ "$(cache STREAMRT_BUILD_PYTHON)" = ON ]; then
  python=$(cache Python3_EXECUTABLE) py_site_rel=$(cache STREAMRT_PYTHON_INSTALL_DIR)
fi

unset LD_LIBRARY_PATH PYTHONPATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH
rm -rf "$work"
mkdir -p "$work"
fail() { echo "install test: FAILED: $*" >&2; exit 1; }

# The library a program loads, as the dynamic loader resolves it (no environment help).
resolved_lib() { ldd "$1" | awk '/libstreamrt\.so/ { print $3 }'; }

check_prefix() {
  local prefix=$1 tag=$2 libdir
  echo "== [$tag] prefix $prefix"
  libdir=$(dirname "$(find "$prefix" -name 'libstreamrt.so.*' -type f | head -n 1)")
  [ -d "$libdir" ] || fail "no libstreamrt.so.* under $prefix"

  if [ "$have_tool" = ON ]; then
    local tool=$prefix/bin/streamrt lib
    lib=$(resolved_lib "$tool")
    case "$(realpath "$lib")" in "$(realpath "$prefix")"/*) ;;
      *) fail "$tool loads '$lib', not the library under $prefix (RPATH)";; esac
    "$tool" --version | tee "$work/version-$tag.txt"
    grep -q '^streamrt [0-9]' "$work/version-$tag.txt" || fail "--version has no version line"
    grep -q '^backends: .*cpu' "$work/version-$tag.txt" || fail "--version lists no cpu backend"
    "$tool" demo --size 128 --iters 2 --small-size 64 --small-iters 10 --out "$work/demo-$tag" \
      > "$work/demo-$tag.txt" || { cat "$work/demo-$tag.txt"; fail "streamrt demo failed"; }
    echo "streamrt demo: ok"
  else
    echo "(the streamrt tool is not built in this configuration: not checked)"
  fi

  if [ -n "$python" ]; then
    local site=$prefix/$py_site_rel out
    [ -f "$site/streamrt/__init__.py" ] || fail "no Python package in $site"
    # Run from the work folder: the source tree's python/ must not be importable by accident.
    out=$(cd "$work" && PYTHONPATH=$site "$python" -c '
import numpy as np, streamrt
s = streamrt.Stream()
with streamrt.stream(s):
    y = streamrt.ones(3, 3) @ streamrt.ones(3, 3)
assert np.array_equal(y.numpy(), np.full((3, 3), 3.0, np.float32)), y.numpy()
print("version", streamrt.__version__)
print("module", streamrt.__file__)')
    echo "$out"
    case "$(echo "$out" | awk '/^module/ { print $2 }')" in "$site"/*) ;;
      *) fail "streamrt was not imported from $site";; esac
    (cd "$work" && PYTHONPATH=$site "$python" -m streamrt) | tee "$work/pyversion-$tag.txt"
    grep -q "^library: $(realpath "$prefix")/" "$work/pyversion-$tag.txt" ||
      fail "the Python module did not load the library under $prefix (RPATH)"
    if [ "$have_tool" = ON ]; then
      # `python3 -m streamrt` starts with exactly what `streamrt --version` prints.
      local n
      n=$(wc -l < "$work/version-$tag.txt")
      head -n "$n" "$work/pyversion-$tag.txt" | diff "$work/version-$tag.txt" - ||
        fail "python3 -m streamrt and streamrt --version differ"
    fi
  else
    echo "(the Python package is not built in this configuration: not checked)"
  fi

  # A separate CMake project: find_package(streamrt) from this prefix only.
  cmake -S "$app_dir" -B "$work/app-cmake-$tag" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF > "$work/app-cmake-$tag.log" ||
    { cat "$work/app-cmake-$tag.log"; fail "configuring the CMake consumer failed"; }
  cmake --build "$work/app-cmake-$tag" >> "$work/app-cmake-$tag.log" 2>&1 ||
    { cat "$work/app-cmake-$tag.log"; fail "building the CMake consumer failed"; }
  "$work/app-cmake-$tag/streamrt_consumer" | tee "$work/app-cmake-$tag.out"
  grep -qx 'consumer: ok' "$work/app-cmake-$tag.out" || fail "the CMake consumer failed"

  # The same program built with pkg-config alone (the .pc file finds its prefix from its place).
  local pc_dir pc_libdir
  pc_dir=$(dirname "$(find "$prefix" -name streamrt.pc | head -n 1)")
  [ -f "$pc_dir/streamrt.pc" ] || fail "no streamrt.pc under $prefix"
  pc_libdir=$(PKG_CONFIG_PATH=$pc_dir pkg-config --variable=libdir streamrt)
  [ "$(realpath "$pc_libdir")" = "$(realpath "$libdir")" ] ||
    fail "streamrt.pc names libdir $pc_libdir, the library is in $libdir"
  # shellcheck disable=SC2046  # pkg-config's output is a list of flags
  "$cxx" -std=c++20 -Wall -Wextra -o "$work/app-pc-$tag" "$app_dir/main.cpp" \
    $(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags --libs streamrt) -Wl,-rpath,"$pc_libdir" ||
    fail "building the pkg-config consumer failed"
  "$work/app-pc-$tag" | tee "$work/app-pc-$tag.out"
  grep -qx 'consumer: ok' "$work/app-pc-$tag.out" || fail "the pkg-config consumer failed"
}

cmake --install "$build_dir" --prefix "$work/prefix" > "$work/install.log" ||
  { cat "$work/install.log"; fail "cmake --install failed"; }
[ -f "$work/prefix/include/streamrt/streamrt.hpp" ] || fail "no headers under the prefix"
check_prefix "$work/prefix" first

# Relocate: a copy elsewhere, and the original gone.
mkdir -p "$work/moved/deeper"
cp -a "$work/prefix" "$work/moved/deeper/prefix"
rm -rf "$work/prefix"
check_prefix "$work/moved/deeper/prefix" moved

echo "install test: ok"
