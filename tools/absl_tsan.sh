#!/usr/bin/env bash
# Builds abseil with ThreadSanitizer for tools/sanitize.sh tsan, from the
# Debian source package of the installed libabsl-dev (same version, same
# Debian patches, so the headers under /usr/include match the libraries).
# Debian's own abseil is not instrumented: TSan cannot see absl::Mutex's
# synchronisation in it and reports every access the mutex orders as a race.
#
# Static libraries and their pkg-config files go to PREFIX; linking through
# PKG_CONFIG_PATH=PREFIX/lib/pkgconfig (third_party/pkg_config_repository.bzl
# reads it) picks them before the system's shared ones. Built once (a few
# minutes on two cores) and reused while PREFIX/.complete names the same
# version.
#
# Usage: tools/absl_tsan.sh PREFIX [JOBS]   (prints PREFIX/lib/pkgconfig)
# Environment: STRATA_DEBIAN_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail
prefix=${1:?usage: tools/absl_tsan.sh PREFIX [JOBS]}
jobs=${2:-$(nproc)}
mirror=${STRATA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
log() { echo "[absl-tsan] $*" >&2; }
die() { echo "[absl-tsan] ERROR: $*" >&2; exit 1; }

version=$(dpkg-query -W -f='${Version}' libabsl-dev 2>/dev/null) \
  || die "libabsl-dev is not installed (tools/bootstrap.sh installs it)"
if [[ -f $prefix/.complete && $(cat "$prefix/.complete") == "$version" ]]; then
  echo "$prefix/lib/pkgconfig"
  exit 0
fi
for tool in curl dpkg-source cmake ninja sha256sum; do
  command -v "$tool" >/dev/null || die "$tool is needed (Debian packages curl, dpkg-dev, cmake, ninja-build)"
done

log "building abseil $version with -fsanitize=thread into $prefix"
work=$(mktemp -d "${TMPDIR:-/tmp}/absl-tsan.XXXXXX")
trap 'rm -rf "$work"' EXIT
dsc="abseil_${version#*:}.dsc"
pool="$mirror/pool/main/a/abseil"
curl -sSf -o "$work/$dsc" "$pool/$dsc" || die "cannot fetch $pool/$dsc"
# The .dsc's SHA-256 lines: " <sum> <size> <file>" until the next field.
files=$(awk '/^Checksums-Sha256:/{on=1; next} /^[^ ]/{on=0} on && NF==3 {print $1 "  " $3}' "$work/$dsc")
[[ -n $files ]] || die "$dsc lists no files"
while read -r sum file; do
  curl -sSf -o "$work/$file" "$pool/$file" || die "cannot fetch $pool/$file"
  echo "$sum  $work/$file" | sha256sum --check --quiet - || die "$file: checksum differs from $dsc"
done <<<"$files"
# Unpacks the upstream source and applies Debian's patches (the .dsc's
# signature is not checked: Debian's keyring need not be installed).
dpkg-source --no-check -x "$work/$dsc" "$work/src" >"$work/unpack.log" 2>&1 \
  || { cat "$work/unpack.log" >&2; die "dpkg-source -x $dsc failed"; }

# As Debian's static build (debian/rules: C++17, static), plus TSan;
# Strata's tsan config compiles with the same -O1 and frame pointers.
flags="-fsanitize=thread -O1 -g -fno-omit-frame-pointer -D_GLIBCXX_USE_CXX11_ABI=1"
rm -rf "$prefix"
cmake -S "$work/src" -B "$work/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=OFF \
  -DBUILD_TESTING=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib \
  >"$work/configure.log" 2>&1 \
  || { tail -n 30 "$work/configure.log" >&2; die "cmake configure failed"; }
cmake --build "$work/build" -j "$jobs" >"$work/build.log" 2>&1 \
  || { tail -n 30 "$work/build.log" >&2; die "build failed"; }
cmake --install "$work/build" >"$work/install.log" 2>&1 \
  || { tail -n 30 "$work/install.log" >&2; die "install failed"; }
# The headers Strata compiles against are the system's: they must be these.
diff -r "$prefix/include/absl" /usr/include/absl >"$work/headers.diff" \
  || { head -n 30 "$work/headers.diff" >&2; die "the built headers differ from /usr/include/absl"; }
echo "$version" >"$prefix/.complete"
log "done"
echo "$prefix/lib/pkgconfig"
