#!/usr/bin/env bash
# Makes the release artifacts of Palisade in one place, from the repository root:
#
#   deploy/package.sh [OUT_DIR]          (default OUT_DIR: target/package)
#
#   OUT_DIR/palisade-<version>-x86_64-linux.tar.gz          the archive:
#       palisade-<version>-x86_64-linux/palisade            the binary (`dist` profile: LTO, stripped)
#       palisade-<version>-x86_64-linux/LICENSE
#       palisade-<version>-x86_64-linux/README.md
#       palisade-<version>-x86_64-linux/palisade.sha256     `sha256sum -c` checks the binary
#   OUT_DIR/palisade-<version>-x86_64-linux.tar.gz.sha256   `sha256sum -c` checks the archive
#   OUT_DIR/krew/palisade.yaml                              the krew manifest, with the archive's digest
#   OUT_DIR/image/                                          the container image's build context (deploy/Dockerfile)
#
# The archive is reproducible: the same binary gives the same bytes (sorted entries, owner
# root, every time stamp the last commit's).
#
# PALISADE_BIN=PATH packages that binary instead of building the `dist` profile (the tests
# package their own build this way). PALISADE_URL_BASE is where the krew manifest says the
# archive is downloaded from (default: the repository's releases).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/target/package}"
arch=x86_64
[ "$(uname -m)" = "$arch" ] || { echo "package: builds $arch-linux artifacts, this is $(uname -m)" >&2; exit 2; }

bin="${PALISADE_BIN:-}"
if [ -z "$bin" ]; then
  echo "package: building the dist profile (LTO: several minutes)" >&2
  (cd "$root" && cargo build --locked --profile dist -p palisade-cli >&2)
  bin="${CARGO_TARGET_DIR:-$root/target}/dist/palisade"
fi
[ -x "$bin" ] || { echo "package: $bin: no such executable" >&2; exit 1; }

# The version the binary reports is the one the archive is named for.
version="$("$bin" --version | awk '$1 == "palisade" {print $2}')"
[ -n "$version" ] || { echo "package: $bin --version: no version" >&2; exit 1; }
name="palisade-$version-$arch-linux"
epoch="${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}"

mkdir -p "$out"
stage="$(mktemp -d "$out/.stage-XXXXXX")"
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/$name"
install -m 0755 "$bin" "$stage/$name/palisade"
install -m 0644 "$root/LICENSE" "$root/README.md" "$stage/$name/"
(cd "$stage/$name" && sha256sum palisade > palisade.sha256)
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
  -C "$stage" -cf - "$name" | gzip -9 -n > "$stage/$name.tar.gz"
(cd "$stage" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
mv -f "$stage/$name.tar.gz" "$stage/$name.tar.gz.sha256" "$out/"

# The krew manifest names this archive and its digest.
digest="$(cut -d' ' -f1 "$out/$name.tar.gz.sha256")"
url_base="${PALISADE_URL_BASE:-https://example.invalid/palisade/releases/download/v$version}"
mkdir -p "$out/krew"
sed -e "s|@VERSION@|$version|g" -e "s|@URI@|$url_base/$name.tar.gz|g" \
    -e "s|@SHA256@|$digest|g" -e "s|@DIR@|$name|g" \
    "$root/deploy/krew/palisade.yaml.in" > "$out/krew/palisade.yaml"

# The image's build context: the binary, and the nft command the agent runs with the
# shared libraries it and the binary load (from this machine: nftables must be installed).
image="$out/image"
rm -rf "$image"
mkdir -p "$image/rootfs/usr/local/bin"
install -m 0755 "$bin" "$image/rootfs/usr/local/bin/palisade"
nft="$(command -v nft || true)"
if [ -n "$nft" ]; then
  install -D -m 0755 "$nft" "$image/rootfs/usr/sbin/nft"
  # Every library either program loads (and the loader), at the path it is looked for.
  libs() { ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && $2 ~ /^\(/ {print $1}'; }
  { libs "$nft"; libs "$bin"; } | sort -u | while read -r lib; do
    install -D -m 0755 "$(readlink -f "$lib")" "$image/rootfs$lib"
  done
  # The Debian packages those files come from, recorded in the image.
  { echo "$nft"; libs "$nft"; libs "$bin"; } | sort -u | while read -r file; do
    dpkg -S "*/${file##*/}" 2>/dev/null | awk -F': ' '{print $1}' | tr ',' '\n' | grep ':amd64$\|^nftables$' || true
  done | sed 's/^ *//' | sort -u | xargs -r dpkg-query -W > "$image/rootfs/PACKAGES"
else
  echo "package: no nft on this machine: the image context is left out (apt-get install nftables)" >&2
  rm -rf "$image"
fi
echo "package: $out/$name.tar.gz" >&2
ls -l "$out/$name.tar.gz" >&2
