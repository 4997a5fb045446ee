#!/usr/bin/env bash
# Builds docker/Dockerfile into an image with podman and smoke-runs it (docs/container.md).
# Where no image registry is reachable, its base is made here: Debian bookworm (Python 3.11)
# by debootstrap from Debian's packages, in place of python:3.11-slim-bookworm.
# Idempotent: the base is made once; a rebuild reuses podman's layer cache.
#   scripts/build_image.sh            base (if missing), build, smoke run
#   scripts/build_image.sh --no-demo  the same without the demo (about a minute less)
# Settings (environment): CORRELAKE_IMAGE (default localhost/correlake:dev),
# CORRELAKE_BASE_IMAGE (default localhost/correlake-base:bookworm: a localhost/ name is made
# here if missing; another, e.g. python:3.11-slim-bookworm, is pulled by the build).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
image="${CORRELAKE_IMAGE:-localhost/correlake:dev}"
base="${CORRELAKE_BASE_IMAGE:-localhost/correlake-base:bookworm}"
uid=10001  # docker/Dockerfile's user
demo=1
[ "${1:-}" = "--no-demo" ] && demo=0

die() { echo "correlake build_image: $*" >&2; exit 2; }
say() { echo "correlake build_image: $*"; }

need=()
command -v podman >/dev/null 2>&1 || need+=(podman runc)
# the stand-in base is made only under a local name that is not there yet
make_base=0
[[ "$base" == localhost/* ]] && ! podman image exists "$base" 2>/dev/null && make_base=1
[ "$make_base" = 0 ] || command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || die "needs: ${need[*]}"
  apt-get update -q >/dev/null && apt-get install -y -q "${need[@]}" >/dev/null
fi

# Where crun cannot run (hybrid cgroups v1+v2), runc can. A container's limits may not be
# raised above the caller's (no CAP_SYS_RESOURCE in some sandboxes), and podman's defaults
# are higher: the caller's open files, and processes capped at 32768.
opts=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)")
nproc="$(ulimit -Hu)"
[ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ] && nproc=32768
opts+=(--ulimit "nproc=$nproc:$nproc")
if [ -d /sys/fs/cgroup/unified ] && command -v runc >/dev/null 2>&1; then
  opts+=(--runtime runc)
fi

if [ "$make_base" = 1 ]; then
  say "making the base image $base with debootstrap ..."
  start=$SECONDS
  tmp="$(mktemp -d "${TMPDIR:-/var/tmp}/correlake-rootfs.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  debootstrap --variant=minbase \
    --include=python3,python3-venv,python3-pip,python-is-python3,ca-certificates,netbase \
    bookworm "$tmp" >"$tmp.log" 2>&1 || { cat "$tmp.log" >&2; rm -f "$tmp.log"; die "debootstrap failed"; }
  rm -f "$tmp.log"
  # the updates and security suites too, from the mirror debootstrap used, as Debian's images have
  mirror="$(awk '$1 == "deb" {print $2; exit}' "$tmp/etc/apt/sources.list")"
  printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb %s-security bookworm-security main\n' \
    "$mirror" "$mirror" "$mirror" >"$tmp/etc/apt/sources.list"
  # the CAs this machine added (e.g. a proxy's, that its TLS to the registries goes through):
  # the build's pip and Maven need them. The official base has none of them.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    say "adding this machine's own CAs to the base: $(cd /usr/local/share/ca-certificates && echo *.crt)"
    cp /usr/local/share/ca-certificates/*.crt "$tmp/usr/local/share/ca-certificates/"
    chroot "$tmp" update-ca-certificates >/dev/null
  fi
  # what is the build machine's, and apt's downloads
  rm -rf "$tmp/etc/hostname" "$tmp/etc/resolv.conf" "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*
  tar -C "$tmp" -c . | podman import --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' - "$base" >/dev/null
  rm -rf "$tmp"
  trap - EXIT
  say "base made in $((SECONDS - start)) s"
fi

say "building $image on $base ..."
start=$SECONDS
# the build's RUN steps fetch from the package registries (apt, PyPI, Maven Central)
podman build "${opts[@]}" --network host --build-arg BASE_IMAGE="$base" \
  -f "$root/docker/Dockerfile" -t "$image" "$root"
say "built in $((SECONDS - start)) s: $(podman image inspect --format '{{.Size}}' "$image") bytes"

# smoke run: no network, the state folder a tmpfs
run=(podman run --rm "${opts[@]}" --network none --tmpfs /tmp:rw,mode=1777,size=2g)
got="$("${run[@]}" --entrypoint id "$image" -u)"
[ "$got" = "$uid" ] || die "the image runs as uid $got, not $uid"
"${run[@]}" "$image" --help >/dev/null || die "correlake --help failed in the image"
say "runs as uid $uid; correlake --help answers"
if [ "$demo" = 1 ]; then
  start=$SECONDS
  # the demo, then who owns the lake it wrote (its writer's uid)
  out="$("${run[@]}" --entrypoint bash "$image" -c \
    'correlake demo 2>&1 && stat -c "lake owner: %u" "$CORRELAKE_HOME/demo/lake"')" || { echo "$out" >&2; die "the demo failed in the image"; }
  echo "$out" | grep -v WARN
  echo "$out" | tail -n 1 | grep -qx "lake owner: $uid" || die "the demo's lake is not uid $uid's"
  say "demo in $((SECONDS - start)) s; its lake written by uid $uid"
fi
