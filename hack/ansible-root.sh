#!/usr/bin/env bash
# Builds (once) and caches the Debian root that the Ansible tests use as a stand-in Atlas 800 A2 node, and
# prints its path.
#
# Why it exists: no Atlas hardware is reachable from CI, yet the roles must run for real against a target
# that behaves like a node. An arm64 Debian root, executed through qemu-user via binfmt_misc, reports
# `uname -m` = aarch64 by itself, so the preflight architecture check is exercised honestly (nothing in the
# playbook or the inventory pretends). An amd64 root of the same suite proves the check fails on x86_64.
# debootstrap takes minutes (the arm64 second stage runs emulated), so the result is cached outside the
# repo under ${XDG_CACHE_HOME:-$HOME/.cache}/ascend-operator/, keyed by suite, arch and this script's
# recipe version; the tests copy it per test and never write into the cache.
#
# Usage: hack/ansible-root.sh [arm64|amd64]   (default arm64). Needs root (debootstrap, chroot, binfmt).
set -euo pipefail

arch="${1:-arm64}"
case "$arch" in
  arm64 | amd64) ;;
  *)
    echo "ansible-root: arch must be arm64 or amd64, not '$arch'" >&2
    exit 2
    ;;
esac
# Bump when the package list or the post-install steps below change: the cache key changes with it.
# sudo: the playbook uses `become` exactly as on a real node. python3-apt: the apt module needs it (Ubuntu
# servers ship it; without it the module would fetch it). libjemalloc2: preinstalled so a test run
# never needs the mirror; the role still declares and checks it.
recipe=5
packages="python3,python3-apt,openssh-server,sudo,libjemalloc2,procps,ca-certificates"

if [[ $EUID -ne 0 ]]; then
  echo "ansible-root: needs root (debootstrap, chroot, binfmt_misc)" >&2
  exit 1
fi

cache="${XDG_CACHE_HOME:-$HOME/.cache}/ascend-operator/ansible-root"
mkdir -p "$cache"

# The arm64 and amd64 builds may start together: one apt-get at a time (and wait for anyone else's).
exec 8>"$cache/.lock-apt"
flock 8
need_apt=()
command -v debootstrap >/dev/null || need_apt+=(debootstrap)
command -v ssh >/dev/null || need_apt+=(openssh-client)
command -v unshare >/dev/null || need_apt+=(util-linux)
if [[ $arch == arm64 && ! -x /usr/bin/qemu-aarch64-static ]]; then
  need_apt+=(qemu-user-static)
fi
if ((${#need_apt[@]})); then
  echo "ansible-root: installing ${need_apt[*]}" >&2
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${need_apt[@]}" >/dev/null
fi

# aarch64 binaries run through qemu-aarch64-static registered with the F (fix-binary) flag, so the
# interpreter is opened now and keeps working inside any chroot without being copied into it.
if [[ $arch == arm64 ]]; then
  binfmt=/proc/sys/fs/binfmt_misc
  [[ -e $binfmt/register ]] || mount -t binfmt_misc binfmt_misc "$binfmt"
  if [[ ! -e $binfmt/qemu-aarch64 ]]; then
    conf=/usr/lib/binfmt.d/qemu-aarch64.conf
    if [[ ! -r $conf ]]; then
      echo "ansible-root: $conf missing (qemu-user-static)" >&2
      exit 1
    fi
    grep -v '^#' "$conf" | head -n1 >"$binfmt/register"
  fi
fi
flock -u 8

# The mirror and suite come from this machine's own apt configuration, never from this file.
read_source() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -r $f ]] || continue
    awk '
      /^URIs:/ && !uri { uri = $2 }
      /^Suites:/ && !suite { suite = $2 }
      /^$/ { if (uri && suite && uri !~ /security/) { print uri, suite; exit } uri = ""; suite = "" }
      END { if (uri && suite && uri !~ /security/) print uri, suite }
    ' "$f" | head -n1
  done
  if [[ -r /etc/apt/sources.list ]]; then
    awk '$1 == "deb" && $2 !~ /^\[/ && $2 !~ /security/ { print $2, $3; exit }' /etc/apt/sources.list
  fi
}
read -r mirror suite < <(read_source | head -n1) || true
if [[ -z ${mirror:-} || -z ${suite:-} ]]; then
  echo "ansible-root: no Debian mirror found in /etc/apt/sources.list{,.d}" >&2
  exit 1
fi

dest="$cache/$suite-$arch-r$recipe"
exec 9>"$cache/.lock-$arch"
flock 9
if [[ -f $dest/.complete ]]; then
  echo "$dest/root"
  exit 0
fi

start=$SECONDS
work="$(mktemp -d "$cache/.build-$arch.XXXXXX")"
cleanup() {
  # A failed build leaves nothing that looks like a cache entry (nor a mount debootstrap left behind).
  if [[ -n ${work:-} && -d $work ]]; then
    awk -v w="$work" '$2 ~ "^"w { print $2 }' /proc/mounts | sort -r | xargs -r -n1 umount -l
    rm -rf --one-file-system "$work"
  fi
}
trap cleanup EXIT
echo "ansible-root: debootstrap $suite/$arch from $mirror (cold build, a few minutes)" >&2
debootstrap --variant=minbase --arch="$arch" --include="$packages" "$suite" "$work/root" "$mirror" \
  >"$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log" >&2
  exit 1
}

root="$work/root"
# Host keys are generated once per cached root; the tests ignore them (throwaway targets on 127.0.0.1).
chroot "$root" /usr/bin/ssh-keygen -A >/dev/null
cat >"$root/etc/ssh/sshd_config.d/ascend-standin.conf" <<'EOF'
# Written by hack/ansible-root.sh: a throwaway test target reached only from 127.0.0.1 with a key.
PermitRootLogin prohibit-password
PasswordAuthentication no
UseDNS no
EOF
mkdir -p "$root/root/.ssh" "$root/run/sshd"
chmod 700 "$root/root/.ssh"
# Keep the copy each test makes small and fast.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
  "$root"/usr/share/man/* "$root"/usr/share/locale/*
mv "$root" "$work/../.tmp-root-$arch-$$"
mkdir -p "$dest"
rm -rf "$dest/root"
mv "$work/../.tmp-root-$arch-$$" "$dest/root"
echo "suite=$suite arch=$arch recipe=$recipe seconds=$((SECONDS - start))" >"$dest/.complete"
echo "ansible-root: built $dest/root in $((SECONDS - start)) s" >&2
echo "$dest/root"
