# Sourced, before any `cd`, by the scripts that change the machine (packages, the Docker
# engine, the lab): root runs them as they are; anyone else is re-run through sudo (a
# sudoer types the same command); without sudo, one clear line and exit 2.
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    exec sudo --preserve-env=GPUPROV_STATE_DIR,GPUPROV_CACHE_DIR,GPUPROV_LAB_DIR,GPUPROV_LEDGER \
      "$(readlink -f "$0")" "$@"
  fi
  echo "$(basename "$0"): needs root: run it as root (there is no sudo here)" >&2
  exit 2
fi
