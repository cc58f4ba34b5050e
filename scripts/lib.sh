# scripts/lib.sh — shared by scripts/test and scripts/bobbin; sourced, never run.
#
# Finding the repository, installing the Debian packages the build needs, and
# configuring/building with meson + ninja. Functions print progress on stderr, so
# callers' stdout stays theirs. Nothing here changes files outside the repository
# except through apt-get, and only for packages that are missing.

BB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BB_BUILD=${BB_BUILD:-$BB_ROOT/build}
BB_BUILD_TSAN=${BB_BUILD_TSAN:-$BB_ROOT/build-tsan}
BB_LIB=$BB_BUILD/libbobbin.so

# Everything a fresh Debian 12 needs for the build, the tests and the benchmarks.
BB_PACKAGES=(meson ninja-build pkg-config gcc g++ libcriterion-dev libffi-dev golang-go wrk gdb python3)

bb_say() { printf 'bobbin: %s\n' "$*" >&2; }
bb_die() { bb_say "$*"; exit 1; }

# bb_missing_packages PKG...: prints the ones dpkg does not list as installed.
bb_missing_packages() {
    local p
    for p in "$@"; do
        if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
            printf '%s\n' "$p"
        fi
    done
}

# bb_as_root CMD...: runs CMD as root (directly, or through sudo).
bb_as_root() {
    if [ "$(id -u)" = 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        bb_die "need root (or sudo) to run: $*"
    fi
}

# bb_install_packages PKG...: installs whatever is missing; a no-op when all are
# there. `apt-get update` runs only when the package lists are empty or an install
# from the existing lists fails.
bb_install_packages() {
    command -v dpkg-query >/dev/null 2>&1 || {
        bb_say "not a Debian system: install $* yourself"
        return 0
    }
    local missing
    mapfile -t missing < <(bb_missing_packages "$@")
    [ ${#missing[@]} -eq 0 ] && return 0
    bb_say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
        bb_as_root apt-get update -q || return 1
    fi
    if ! bb_as_root apt-get install -y -q --no-install-recommends "${missing[@]}"; then
        bb_as_root apt-get update -q || return 1
        bb_as_root apt-get install -y -q --no-install-recommends "${missing[@]}" || return 1
    fi
}

bb_install_deps() {
    bb_install_packages "${BB_PACKAGES[@]}"
}

bb_is_configured() {   # DIR
    [ -f "$1/build.ninja" ] && [ -f "$1/meson-private/coredata.dat" ]
}

# bb_configure DIR [MESON_OPTION]...: `meson setup`, or `--reconfigure` when DIR
# already holds a build (so new options and new meson.build files are picked up).
bb_configure() {
    local dir=$1
    shift
    if bb_is_configured "$dir"; then
        meson setup --reconfigure "$dir" "$BB_ROOT" "$@" >&2
    else
        meson setup "$dir" "$BB_ROOT" "$@" >&2
    fi
}

# bb_quietly CMD...: runs CMD with its output kept back unless it fails.
bb_quietly() {
    local log rc
    log=$(mktemp "${TMPDIR:-/tmp}/bobbin-build.XXXXXX")
    "$@" >"$log" 2>&1
    rc=$?
    if [ $rc -ne 0 ]; then
        cat "$log" >&2
    fi
    rm -f "$log"
    return $rc
}

# bb_build_targets [TARGET]...: builds $BB_BUILD (configuring it the first time)
# and brings the given ninja targets up to date (ninja rebuilds whatever is
# stale, so this is cheap when nothing changed). Quiet unless something fails.
bb_build_targets() {
    if ! bb_is_configured "$BB_BUILD"; then
        bb_install_packages meson ninja-build pkg-config gcc || return 1
        bb_say "configuring $BB_BUILD"
        bb_quietly meson setup "$BB_BUILD" "$BB_ROOT" || return 1
    fi
    bb_quietly ninja -C "$BB_BUILD" "$@"
}

# bb_build_lib: makes sure $BB_LIB exists and is up to date with the sources.
bb_build_lib() {
    bb_build_targets libbobbin.so || bb_die "building libbobbin.so failed (see above)"
    [ -f "$BB_LIB" ] || bb_die "$BB_LIB missing after the build"
}
