#!/usr/bin/env bash
# Installs the Debian packages Atlas uses: tesseract-ocr (OCR of scanned pages and images) for running it, and with
# --tests also postgresql (the test suite starts its own throw-away server for the PostgreSQL instance storage),
# chromium (the review page's test drives a real headless browser through playwright), redis-server (the broker
# of the Celery scale-out test) and R with metafor (the meta-analysis test reads the exported escalc files).
# Idempotent: does nothing when they are already present. Waits for another apt/dpkg run to finish instead of failing.
set -euo pipefail
missing=()
command -v tesseract >/dev/null 2>&1 || missing+=(tesseract-ocr tesseract-ocr-eng)
if [ "${1:-}" = "--tests" ]; then
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
  # R and metafor: the meta-analysis test fits a random-effects model on the exported escalc file
  Rscript -e 'quit(status = !requireNamespace("metafor", quietly = TRUE))' >/dev/null 2>&1 \
    || missing+=(r-base-core r-cran-metafor)
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "atlas: please install ${missing[*]} with your package manager (apt-get not found)" >&2
  exit 1
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
LOCK=(-o DPkg::Lock::Timeout=600)  # another apt run holds the lock: wait for it (up to 10 minutes)
echo "atlas: installing Debian packages: ${missing[*]}"
$SUDO apt-get "${LOCK[@]}" update -q >/dev/null
DEBIAN_FRONTEND=noninteractive $SUDO apt-get "${LOCK[@]}" install -y -q --no-install-recommends "${missing[@]}" >/dev/null
