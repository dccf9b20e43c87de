#!/usr/bin/env bash
# Build OpenNN (library target only) from the pinned archives, install it, then build bench's
# driver (images/opennn/driver) against the installed library. One command for every place
# that builds it: `bench env create opennn` (local cache), the Dockerfile, CI, the GPU machine.
#
#   build.sh --vendor DIR --lib-prefix DIR --driver-prefix DIR [--cuda] [--cuda-arch 90]
#            [--cudnn-root DIR] [--deps-prefix DIR] [--jobs N] [--work DIR]
#
#   --vendor DIR        folder holding the archives of sources.txt (checked against its sha256)
#   --lib-prefix DIR    where OpenNN (+ Eigen headers) is installed; skipped when DIR/.complete exists
#   --driver-prefix DIR where bin/bench_opennn_driver is installed; skipped when DIR/.complete exists
#   --cuda              CUDA build (default: CPU, -DOpenNN_DISABLE_CUDA=ON)
#   --cuda-arch N       CMAKE_CUDA_ARCHITECTURES (default 90)
#   --cudnn-root DIR    cuDNN with include/cudnn.h and lib/libcudnn.so.9 (e.g. the nvidia-cudnn-cu13 wheel)
#   --deps-prefix DIR   a root with usr/include and usr/lib/x86_64-linux-gnu holding zlib and libjpeg
#                       (Debian .deb files unpacked with dpkg -x), for machines without apt; or a
#                       folder of those .deb files, unpacked into LIB_PREFIX/deps
#   --jobs N            parallel compile jobs (default: nproc)
#   --work DIR          scratch folder (default: $BENCH_OPENNN_WORK, else a temporary one removed
#                       after a success); a fixed one lets ccache reuse objects across machines/images
#   --sha NAME=SHA256   accept this sha256 for archive NAME instead of its pin in sources.txt
#                       (another archive of the same commit, e.g. one downloaded from upstream)
#
# Errors in the inputs (a missing or corrupt archive, no compiler...) are one line on stderr and
# exit 2; a failing compile is one line naming the step and its log, exit 1. Timings go to
# DIR/build-info.txt of each prefix.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PROG="bench-opennn-build"
die() { echo "$PROG: error: $*" >&2; exit 2; }
log() { echo "[$PROG] $*" >&2; }

declare -A SHA_OVERRIDE=()
VENDOR="" LIB_PREFIX="" DRIVER_PREFIX="" CUDA=0 CUDA_ARCH=90 CUDNN_ROOT="" DEPS_PREFIX="" JOBS="" WORK=""
while [ $# -gt 0 ]; do
  case "$1" in
    --vendor) VENDOR="${2:-}"; shift 2 ;;
    --lib-prefix) LIB_PREFIX="${2:-}"; shift 2 ;;
    --driver-prefix) DRIVER_PREFIX="${2:-}"; shift 2 ;;
    --cuda) CUDA=1; shift ;;
    --cuda-arch) CUDA_ARCH="${2:-}"; shift 2 ;;
    --cudnn-root) CUDNN_ROOT="${2:-}"; shift 2 ;;
    --deps-prefix) DEPS_PREFIX="${2:-}"; shift 2 ;;
    --jobs) JOBS="${2:-}"; shift 2 ;;
    --work) WORK="${2:-}"; shift 2 ;;
    --sha) [[ "${2:-}" == *=* ]] || die "--sha expects NAME=SHA256"; SHA_OVERRIDE["${2%%=*}"]="${2#*=}"; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ -n "$LIB_PREFIX" ] || die "--lib-prefix is required"
[ -n "$DRIVER_PREFIX" ] || die "--driver-prefix is required"
JOBS="${JOBS:-$(nproc)}"
WORK="${WORK:-${BENCH_OPENNN_WORK:-}}"
for tool in cmake ninja; do command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found (install cmake and ninja-build)"; done
CXX="${CXX:-$(command -v g++ || command -v c++ || true)}"
[ -n "$CXX" ] || die "no C++ compiler found (install g++ >= 12)"

variant_flags=(-DOpenNN_DISABLE_CUDA=ON)
rpath=""
if [ "$CUDA" = 1 ]; then
  command -v nvcc >/dev/null 2>&1 || die "--cuda: nvcc not found on PATH"
  variant_flags=(-DOpenNN_DISABLE_CUDA=OFF "-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCH")
  if [ -n "$CUDNN_ROOT" ]; then
    [ -f "$CUDNN_ROOT/include/cudnn.h" ] || die "--cudnn-root $CUDNN_ROOT: include/cudnn.h not found"
    lib="$(ls "$CUDNN_ROOT"/lib/libcudnn.so* 2>/dev/null | head -n 1 || true)"
    [ -n "$lib" ] || die "--cudnn-root $CUDNN_ROOT: lib/libcudnn.so* not found"
    variant_flags+=("-DCUDNN_INCLUDE_DIR=$CUDNN_ROOT/include" "-DCUDNN_LIBRARY=$lib")
    rpath="$CUDNN_ROOT/lib"
  fi
fi
if [ -n "$DEPS_PREFIX" ] && [ ! -d "$DEPS_PREFIX/usr/include" ] && compgen -G "$DEPS_PREFIX/*.deb" >/dev/null; then
  root="$LIB_PREFIX/deps"
  mkdir -p "$root"
  for deb in "$DEPS_PREFIX"/*.deb; do
    if command -v dpkg-deb >/dev/null 2>&1; then
      dpkg-deb -x "$deb" "$root" || die "cannot unpack $deb"
    else  # a .deb is an ar archive holding data.tar.*
      scratch="$(mktemp -d)"; (cd "$scratch" && ar x "$deb" && tar -xf data.tar.* -C "$root") || die "cannot unpack $deb (no dpkg-deb; ar/tar failed)"
      rm -rf "$scratch"
    fi
  done
  log "unpacked $(ls "$DEPS_PREFIX"/*.deb | wc -l) .deb files into $root"
  DEPS_PREFIX="$root"
fi
if [ -n "$DEPS_PREFIX" ]; then
  inc="$DEPS_PREFIX/usr/include"; libdir="$DEPS_PREFIX/usr/lib/x86_64-linux-gnu"
  [ -f "$inc/zlib.h" ] || die "--deps-prefix $DEPS_PREFIX: usr/include/zlib.h not found (unpack zlib1g-dev with dpkg -x)"
  [ -f "$inc/jpeglib.h" ] || [ -f "$inc/x86_64-linux-gnu/jpeglib.h" ] || die "--deps-prefix $DEPS_PREFIX: jpeglib.h not found (unpack libjpeg62-turbo-dev with dpkg -x)"
  export CPATH="$inc:$inc/x86_64-linux-gnu${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$libdir${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # no CMAKE_PREFIX_PATH here: the driver sets its own (the library prefix first); a second -D would replace it
  variant_flags+=("-DZLIB_ROOT=$DEPS_PREFIX/usr")
  rpath="${rpath:+$rpath;}$libdir"
fi
launcher=()
if [ "${BENCH_OPENNN_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  # the same compiler release and the same work folder hit the cache from another image
  export CCACHE_COMPILERCHECK="string:$("$CXX" -dumpfullversion)" CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
fi

# <format>: GCC 12's libstdc++ lacks it; the shim in compat/ maps it onto {fmt} (header-only).
compat_flags=""
if ! echo '#include <format>' | "$CXX" -std=c++20 -x c++ -fsyntax-only - >/dev/null 2>&1; then
  echo '#include <format>
int main() { return std::format("{:d}", 1).size() == 1 ? 0 : 1; }' \
    | "$CXX" -std=c++20 -isystem "$HERE/compat" -x c++ -fsyntax-only - >/dev/null 2>&1 \
    || die "$CXX has no <format> and the {fmt} headers were not found (install g++ >= 13, or libfmt-dev)"
  compat_flags="-isystem @WORK@/compat"
  log "$CXX lacks <format>: using the {fmt} shim in compat/"
fi

own_work=0
if [ -z "$WORK" ]; then WORK="$(mktemp -d "${TMPDIR:-/tmp}/bench-opennn-build.XXXXXX")"; own_work=1; fi
mkdir -p "$WORK"
compat_flags="${compat_flags//@WORK@/$WORK}"
if [ -n "$compat_flags" ]; then rm -rf "$WORK/compat" && cp -r "$HERE/compat" "$WORK/compat"; fi
# an input error leaves nothing behind; a failed compile keeps the scratch folder and its logs
trap 'rc=$?; if [ "$own_work" = 1 ] && [ "$rc" = 2 ]; then rm -rf "$WORK"; fi' EXIT
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
step() {  # step NAME LOG command...: run quietly into LOG; one line naming the step on failure
  local name="$1" logfile="$2"; shift 2
  if ! "$@" >>"$logfile" 2>&1; then
    echo "$PROG: $name failed; log: $logfile" >&2
    tail -n 15 "$logfile" | sed 's/^/    /' >&2
    exit 1
  fi
}

verify_and_extract() {
  [ -n "$VENDOR" ] || die "--vendor is required to build the library (or set BENCH_OPENNN_VENDOR)"
  [ -d "$VENDOR" ] || die "--vendor $VENDOR: not a folder"
  mkdir -p "$WORK/src"
  while read -r name file sha upstream commit; do  # every archive present before any is unpacked
    case "$name" in ''|'#'*) continue ;; esac
    [ -f "$VENDOR/$file" ] || die "source archive missing: $VENDOR/$file ($name at $upstream commit $commit)"
  done <"$HERE/sources.txt"
  while read -r name file sha upstream commit; do
    case "$name" in ''|'#'*) continue ;; esac
    local path="$VENDOR/$file"
    sha="${SHA_OVERRIDE[$name]:-$sha}"
    local got
    got="$(sha256sum "$path" | cut -d' ' -f1)"
    [ "$got" = "$sha" ] || die "source archive corrupt: $path has sha256 $got, expected $sha"
    local unpack="$WORK/unpack-$name"
    rm -rf "$unpack" && mkdir -p "$unpack"
    tar -xzf "$path" -C "$unpack" 2>/dev/null || die "source archive unreadable: $path"
    # one top folder, whatever its name (upstream archives name it after the full commit)
    local tops=("$unpack"/*)
    [ "${#tops[@]}" = 1 ] && [ -d "${tops[0]}" ] || die "source archive $path does not hold exactly one top folder"
    rm -rf "$WORK/src/${file%.tar.gz}"
    mv "${tops[0]}" "$WORK/src/${file%.tar.gz}"
    rmdir "$unpack"
  done <"$HERE/sources.txt"
}

build_library() {
  local started; started="$(now)"
  local src="$WORK/src" build="$WORK/build-lib" logfile="$WORK/library.log"
  log "configuring OpenNN ($([ "$CUDA" = 1 ] && echo "CUDA, arch $CUDA_ARCH" || echo CPU)); log: $logfile"
  step "configuring OpenNN" "$logfile" cmake -S "$src/opennn-5ffbaa62" -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release "-DCMAKE_INSTALL_PREFIX=$LIB_PREFIX" "-DCMAKE_CXX_FLAGS=$compat_flags" \
    -DFETCHCONTENT_FULLY_DISCONNECTED=ON \
    "-DFETCHCONTENT_SOURCE_DIR_EIGEN=$src/eigen-5.0.1" \
    "-DFETCHCONTENT_SOURCE_DIR_CUDNN_FRONTEND=$src/cudnn-frontend-1.22.1" \
    -DOpenNN_BUILD_TESTS=OFF -DOpenNN_BUILD_EXAMPLES=OFF -DOpenNN_ENABLE_LTO=OFF \
    -DCMAKE_DISABLE_FIND_PACKAGE_Eigen3=ON -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_EXPORT_NO_PACKAGE_REGISTRY=ON \
    ${DEPS_PREFIX:+"-DCMAKE_PREFIX_PATH=$DEPS_PREFIX/usr"} "${variant_flags[@]}" "${launcher[@]}"
  local configured; configured="$(since "$started")"
  log "compiling the OpenNN library target with $JOBS jobs (the longest step)"
  local compile_started; compile_started="$(now)"
  step "compiling OpenNN" "$logfile" cmake --build "$build" --target opennn -j "$JOBS"
  local compiled; compiled="$(since "$compile_started")"
  step "installing OpenNN" "$logfile" cmake --install "$build"
  step "installing Eigen" "$logfile" cmake --install "$build/_deps/eigen-build" --prefix "$LIB_PREFIX"
  cat >"$LIB_PREFIX/build-info.txt" <<EOF
variant $([ "$CUDA" = 1 ] && echo cuda || echo cpu)
cuda_arch $([ "$CUDA" = 1 ] && echo "$CUDA_ARCH" || echo -)
compiler $("$CXX" --version | head -n 1)
cxx_flags ${compat_flags:-(none)}
jobs $JOBS
configure_s $configured
compile_s $compiled
total_s $(since "$started")
rpath ${rpath:--}
EOF
  touch "$LIB_PREFIX/.complete"
  log "OpenNN library: configure ${configured} s, compile ${compiled} s"
}

build_driver() {
  local started; started="$(now)"
  local build="$WORK/build-driver" logfile="$WORK/driver.log"
  step "configuring the driver" "$logfile" cmake -S "$HERE/driver" -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=$LIB_PREFIX${DEPS_PREFIX:+;$DEPS_PREFIX/usr}" \
    "-DCMAKE_INSTALL_PREFIX=$DRIVER_PREFIX" "-DCMAKE_CXX_FLAGS=$compat_flags" \
    "-DCMAKE_INSTALL_RPATH=$rpath" -DCMAKE_INSTALL_RPATH_USE_LINK_PATH=ON \
    "${variant_flags[@]:1}" "${launcher[@]}"
  step "compiling the driver" "$logfile" cmake --build "$build" -j "$JOBS"
  step "installing the driver" "$logfile" cmake --install "$build"
  cat >"$DRIVER_PREFIX/build-info.txt" <<EOF
variant $([ "$CUDA" = 1 ] && echo cuda || echo cpu)
library $LIB_PREFIX
compile_s $(since "$started")
ld_library_path ${rpath//;/:}
EOF
  touch "$DRIVER_PREFIX/.complete"
  log "driver: $DRIVER_PREFIX/bin/bench_opennn_driver ($(since "$started") s)"
}

mkdir -p "$LIB_PREFIX" "$DRIVER_PREFIX"
if [ ! -f "$LIB_PREFIX/.complete" ]; then
  verify_and_extract
  build_library
else
  log "OpenNN library already built: $LIB_PREFIX"
fi
if [ ! -f "$DRIVER_PREFIX/.complete" ]; then
  build_driver
else
  log "driver already built: $DRIVER_PREFIX"
fi
[ "$own_work" = 1 ] && rm -rf "$WORK"
echo "$DRIVER_PREFIX/bin/bench_opennn_driver"
