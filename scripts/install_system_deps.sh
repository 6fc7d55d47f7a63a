#!/usr/bin/env bash
# Installs the Debian packages the pipeline uses: tesseract-ocr (OCR of image-only PDF pages) and postgresql
# (the tests start a throw-away server for the PostgreSQL instance storage).
# Idempotent: does nothing when they are already present.
set -euo pipefail
missing=()
command -v tesseract >/dev/null 2>&1 || missing+=(tesseract-ocr tesseract-ocr-eng)
# PostgreSQL server binaries: the test suite starts its own server (instance storage on PostgreSQL)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "atlas: please install ${missing[*]} with your package manager (apt-get not found)" >&2
  exit 1
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "atlas: installing Debian packages: ${missing[*]}"
$SUDO apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
