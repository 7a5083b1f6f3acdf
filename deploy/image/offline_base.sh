#!/bin/sh
# A Debian bookworm + Python 3.11 base image made without a registry, for `make image` on machines
# that cannot pull python:3.11-slim-bookworm:
#
#     deploy/image/offline_base.sh [TAG]      # default graphserve-base:bookworm; needs root
#     make image BASE_IMAGE=graphserve-base:bookworm
#
# The host's pip configuration (/etc/pip.conf, the CA bundle it or PIP_CERT names, PIP_INDEX_URL)
# is copied into the base, the bundle at the same path, so the build's pip uses the host's index
# and certificates.
# MIRROR overrides the Debian mirror.
set -eu
tag=${1:-graphserve-base:bookworm}
mirror=${MIRROR:-http://deb.debian.org/debian}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$root" "$mirror"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb

if [ -f /etc/pip.conf ]; then
    cp /etc/pip.conf "$root/etc/pip.conf"
fi
# What /etc/pip.conf does not say goes to pip's other site-wide file.
extra=
cert=${PIP_CERT:-$(sed -n 's/^[[:space:]]*cert[[:space:]]*=[[:space:]]*//p' /etc/pip.conf 2>/dev/null | head -n 1)}
if [ -n "$cert" ] && [ -f "$cert" ]; then
    mkdir -p "$root$(dirname "$cert")"
    cp "$cert" "$root$cert"
    extra="${extra}cert = $cert\n"
fi
if [ -n "${PIP_INDEX_URL:-}" ]; then
    extra="${extra}index-url = $PIP_INDEX_URL\n"
fi
if [ -n "$extra" ]; then
    mkdir -p "$root/etc/xdg/pip"
    printf '[global]\n%b' "$extra" > "$root/etc/xdg/pip/pip.conf"
fi

tar -C "$root" -c . | docker import - "$tag"
echo "$tag"
