# Sourced by the hack/*.sh scripts that install one PyPI tool into a virtualenv of its own, cached outside the
# repo by version: ${XDG_CACHE_HOME:-$HOME/.cache}/ascend-operator/<name>-<version>/, built under a lock and
# stamped (.done) once the tool's `--help` ran, so a broken install fails there and not in a test, and a warm
# call is one file check. Prints the tool's path as the last line of stdout; progress goes to stderr.
#   pip_tool NAME VERSION REQUIREMENT BINARY
pip_tool() {
  local name="$1" version="$2" requirement="$3" binary="$4"
  local venv="${XDG_CACHE_HOME:-$HOME/.cache}/ascend-operator/$name-$version"
  local bin="$venv/bin/$binary"
  if [[ -f "$venv/.done" ]]; then echo "$bin"; return 0; fi
  mkdir -p "$(dirname "$venv")"
  exec 9>"$venv.lock"
  flock 9
  if [[ ! -f "$venv/.done" ]]; then
    echo "$name: installing $requirement into $venv" >&2
    [[ -x "$venv/bin/python" ]] || "${PYTHON:-python3}" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$requirement" >&2
    "$bin" --help >/dev/null
    touch "$venv/.done"
  fi
  exec 9>&-
  echo "$bin"
}
